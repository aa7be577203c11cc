"""Flower → `dpfl.track`: a server Strategy wrapped so that each round's metrics and DP release are logged.

Flower's central-DP wrappers (``flwr.server.strategy.DifferentialPrivacyServerSideFixedClipping``
and ``DifferentialPrivacyClientSideFixedClipping``, flwr 1.42, ``server/strategy/dp_fixed_clipping.py``)
clip each sampled client's model update Δᵢ to L2 norm C (on the server, or on the client by
``fixedclipping_mod``), let the inner strategy aggregate, and add N(0, s²·I) to the aggregate with

    s = z · C / n        (``flwr.supercore.differential_privacy.compute_stdv``)

z the wrapper's ``noise_multiplier``, n its ``num_sampled_clients``. The inner strategy must be
FedAvg (or a subclass keeping its ``aggregate_fit``): the aggregate is then Σᵢ wᵢ·(θ + clip(Δᵢ)),
wᵢ = num_examplesᵢ / Σⱼ num_examplesⱼ over the m clients that answered. The clients' reported
``num_examples`` are taken as public: the guarantee covers a client whose update changes, not one
whose reported size does (clients that report equal sizes, as DP-FedAvg's clients do, have
wᵢ = 1/m).

What we account, not what Flower assumes:

- Neighbouring relation: replace one client. Replacing client i moves its clipped update by up to
  2C, so the aggregate by up to Δ = 2C·maxᵢ wᵢ (= 2C/m with equal sizes). The round's Gaussian has
  noise multiplier σ = s / Δ = z / (2·n·maxᵢ wᵢ): z/2 when all n sampled clients answer with equal
  sizes. Fewer answers (m < n: Flower only warns) leave the noise at z·C/n and raise Δ, and σ says so.
- Sampling: FedAvg's ``configure_fit`` draws a fixed number m of the N available clients uniformly
  without replacement (``ClientManager.sample``), never a Poisson sample. So a round is
  ``SampledWithoutReplacementEvent(N, m, GaussianEvent(σ))``, dp-accounting's
  ``SampledWithoutReplacementDpEvent`` (Wang, Balle & Kasiviswanathan 2019, Thm 27), whose bound
  holds only for replace-one neighbours; m = N (everyone, every round) is a replace-one Gaussian,
  ``GDPEvent(1/σ, neighbouring="replace_one")``. Poisson amplification at q = m/N is not claimed:
  it does not hold for a fixed-size sample. Only the ``rdp`` accountant accounts sampling without
  replacement; the run's ledger is one party, ``server``, and its ε is per client (notion ``agent``).

Adaptive clipping (``DifferentialPrivacy*SideAdaptiveClipping``) is refused: in flwr 1.42 its noise
is scaled by the clipping norm *after* that round's update (C_{t+1} = C_t·exp(−η(b̃ − γ)), b̃ the
noisy clipped fraction) while the updates were clipped at C_t, so the noise multiplier of each
round depends on a noisy, data-dependent quantity no fixed event covers.

Flower itself computes no ε; the ε your code reports (`reported_epsilon`: a callable of the round, or
the name of a metric your strategy aggregates) is logged beside ours, and the run page flags it
when it is smaller.

This module needs the ``flower`` extra (``flwr``); ``dpfl`` itself imports without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from dpfl.errors import SpecError
from dpfl.privacy.events import Event, GaussianEvent, GDPEvent, SampledWithoutReplacementEvent
from dpfl.track import TrackedRun

try:
    from flwr.server.strategy import FedAvg
    from flwr.server.strategy import Strategy as _Strategy
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("dpfl.adapters.flower needs Flower: pip install 'dpfl-explorer[flower]'") from exc

__all__ = ["FlowerLedger", "round_event"]

_FIXED = ("DifferentialPrivacyServerSideFixedClipping", "DifferentialPrivacyClientSideFixedClipping")
_ADAPTIVE = ("DifferentialPrivacyServerSideAdaptiveClipping", "DifferentialPrivacyClientSideAdaptiveClipping")


def round_event(
    *,
    noise_multiplier: float,
    num_sampled_clients: int,
    num_examples: list[int],
    population: int,
) -> Event:
    """Returns the ledger event of one round of a Flower fixed-clipping DP wrapper over FedAvg.

    Args:
        noise_multiplier: z, the wrapper's: the noise std is z·C/n.
        num_sampled_clients: n, the wrapper's (the noise's denominator, whoever answered).
        num_examples: the reported sizes of the clients that answered (FedAvg's weights).
        population: N, the clients available when the round sampled its m = len(num_examples).

    Raises:
        SpecError: z ≤ 0 (no finite ε), no client answered, or more answered than were available.
    """
    if not noise_multiplier > 0:
        raise SpecError(
            "strategy.noise_multiplier",
            f"is {noise_multiplier!r}: a release without noise has no finite ε; wrap the strategy with "
            "noise_multiplier > 0.",
        )
    m, total = len(num_examples), sum(num_examples)
    if not 1 <= m <= population or total <= 0:
        raise SpecError(
            "results",
            f"has {m} clients answering ({total} examples) of {population} available; a round's "
            "release needs 1 to the available number, with examples.",
        )
    largest = max(num_examples) / total  # the largest FedAvg weight: Δ = 2C·largest
    sigma = noise_multiplier / (2 * num_sampled_clients * largest)
    if m == population:  # everyone, every round: nothing sampled, nothing amplified
        return GDPEvent(1 / sigma, neighbouring="replace_one")
    return SampledWithoutReplacementEvent(population, m, GaussianEvent(sigma))


def _dp_wrapper(strategy: Any, notion: str | None) -> Any:
    """Returns Flower's fixed-clipping DP wrapper `strategy` is, or None for a strategy without DP
    (only for a run whose notion is `none`)."""
    name = type(strategy).__name__
    if name in _ADAPTIVE:
        raise SpecError(
            "strategy",
            f"is {name}: its noise is scaled by the clipping norm after the round's update, not the "
            "one the updates were clipped to, so no fixed event accounts a round; use a fixed-clipping "
            f"wrapper ({', '.join(_FIXED)}).",
        )
    if name not in _FIXED:
        if notion not in (None, "none"):
            raise SpecError(
                "strategy",
                f"is a {name} without Flower's DP wrapper, which releases every round without noise; "
                f"wrap it with {' or '.join(_FIXED)}, or log the run with notion 'none'.",
            )
        return None
    inner = strategy.strategy
    if not (isinstance(inner, FedAvg) and type(inner).aggregate_fit is FedAvg.aggregate_fit):
        raise SpecError(
            "strategy.strategy",
            f"is a {type(inner).__name__}: the sensitivity of its aggregate is not that of FedAvg's "
            "weighted mean of clipped updates, the only one accounted here; wrap FedAvg (or a subclass "
            "keeping its aggregate_fit).",
        )
    return strategy


class FlowerLedger(_Strategy):
    """A Flower server Strategy that runs the one it wraps and logs each round into a `dpfl.track` run.

    Each round is logged once it ends (after its federated evaluation, or after its fit when no
    client evaluates; `flush` logs a round still open): FedAvg's aggregated fit and evaluate
    metrics (an ``accuracy`` metric as the round's accuracy, the evaluate loss as its loss, the
    rest under ``fit.*``, ``evaluate.*`` and ``server.*`` for centralised evaluation), and the round's
    release as the ``server`` party's event (`round_event`).

    Example::

        with track.start_run(algorithm="dp-fedavg (flower)", dataset="digits", notion="agent",
                             delta=1e-5, server=url) as run:
            strategy = FlowerLedger(DifferentialPrivacyServerSideFixedClipping(FedAvg(...), 1.0, 0.5, 3),
                                    run, reported_epsilon=lambda r: my_epsilon(r))
            run_simulation(ServerApp(config=ServerConfig(num_rounds=3), strategy=strategy), ...)
            strategy.flush()
    """

    def __init__(
        self,
        strategy: Any,
        run: TrackedRun,
        *,
        reported_epsilon: Callable[[int], float | None] | str | None = None,
    ):
        """
        Args:
            strategy: the Flower Strategy to run: a fixed-clipping DP wrapper over FedAvg, or any
                strategy for a run with notion ``none``.
            run: the run `dpfl.track.start_run` opened.
            reported_epsilon: the ε your code reports after each round: a callable of the round
                number, or the name of a metric in the round's aggregated fit or evaluate metrics.

        Raises:
            SpecError: a strategy whose releases cannot be accounted (see the module), naming it.
        """
        self.strategy = strategy
        self.run = run
        self.reported_epsilon = reported_epsilon
        self._dp = _dp_wrapper(strategy, run.description.get("notion"))
        self._population: dict[int, int] = {}  # round ↦ clients available when it sampled
        self._open: dict[str, Any] | None = None  # the round being assembled
        self.logged: list[dict[str, Any]] = []  # what the server answered, round by round

    def __repr__(self) -> str:
        return f"FlowerLedger({self.strategy!r})"

    # -- Flower's Strategy hooks: each delegates, then notes what the round released or measured --

    def initialize_parameters(self, client_manager: Any) -> Any:
        return self.strategy.initialize_parameters(client_manager)

    def configure_fit(self, server_round: int, parameters: Any, client_manager: Any) -> list:
        self.flush()  # a round not yet logged (no evaluation ran after it) ends here
        instructions = self.strategy.configure_fit(server_round, parameters, client_manager)
        # read after sampling, which waits for FedAvg's min_available_clients: the clients sampled from
        self._population[server_round] = client_manager.num_available()
        return instructions

    def aggregate_fit(self, server_round: int, results: list, failures: list) -> tuple[Any, dict]:
        sizes = [res.num_examples for _, res in results]
        parameters, metrics = self.strategy.aggregate_fit(server_round, results, failures)
        record = self._round(server_round)
        record["fit"] = dict(metrics or {})
        if parameters is not None and self._dp is not None:  # None: nothing released (a failure)
            record["events"] = [
                round_event(
                    noise_multiplier=self._dp.noise_multiplier,
                    num_sampled_clients=self._dp.num_sampled_clients,
                    num_examples=sizes,
                    population=self._population.get(server_round, len(sizes)),
                )
            ]
        return parameters, metrics

    def evaluate(self, server_round: int, parameters: Any) -> tuple[float, dict] | None:
        out = self.strategy.evaluate(server_round, parameters)
        if out is not None and server_round >= 1:
            loss, metrics = out
            self._round(server_round)["server"] = {"loss": loss, **(metrics or {})}
        return out

    def configure_evaluate(self, server_round: int, parameters: Any, client_manager: Any) -> list:
        instructions = self.strategy.configure_evaluate(server_round, parameters, client_manager)
        if not instructions:  # no federated evaluation: the round ends with its fit
            self.flush()
        return instructions

    def aggregate_evaluate(self, server_round: int, results: list, failures: list) -> tuple[Any, dict]:
        loss, metrics = self.strategy.aggregate_evaluate(server_round, results, failures)
        record = self._round(server_round)
        record["evaluate"] = {**({"loss": loss} if loss is not None else {}), **(metrics or {})}
        self.flush()
        return loss, metrics

    # -- logging --

    def flush(self) -> dict[str, Any] | None:
        """Logs the round being assembled, if any; returns what the server answered."""
        record, self._open = self._open, None
        if record is None:
            return None
        fit, evaluate, server = record.get("fit", {}), record.get("evaluate", {}), record.get("server", {})
        accuracy = _number(evaluate.get("accuracy", server.get("accuracy")))
        loss = _number(evaluate.get("loss", server.get("loss")))
        metrics = {
            f"{where}.{key}": float(value)
            for where, values in (("fit", fit), ("evaluate", evaluate), ("server", server))
            for key, value in values.items()
            if _number(value) is not None
        }
        answer = self.run.log_round(
            record["round"],
            accuracy=accuracy,
            loss=loss,
            metrics=metrics or None,
            events={"server": record["events"]} if record.get("events") else None,
            reported_epsilon=self._reported(record["round"], {**fit, **evaluate}),
        )
        self.logged.append(answer)
        return answer

    def _round(self, server_round: int) -> dict[str, Any]:
        if self._open is not None and self._open["round"] != server_round:
            self.flush()
        if self._open is None:
            self._open = {"round": server_round}
        return self._open

    def _reported(self, server_round: int, metrics: Mapping[str, Any]) -> float | None:
        if self.reported_epsilon is None:
            return None
        if callable(self.reported_epsilon):
            return self.reported_epsilon(server_round)
        return _number(metrics.get(self.reported_epsilon))


def _number(value: Any) -> float | None:
    """Returns a finite real metric as a float, None for anything else (strings, bytes, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)

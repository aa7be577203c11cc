"""Opacus → `dpfl.track`: the releases an Opacus `PrivacyEngine` accounted, as ledger events per client.

Every Opacus accountant (``rdp``, ``prv``, ``gdp``) keeps ``accountant.history``, a list of
``(noise_multiplier, sample_rate, num_steps)``. Each ``step()`` of a private optimizer calls
``accountant.step(noise_multiplier=σ, sample_rate=q)``, which adds one to the last entry's
``num_steps`` when σ and q are those of the last entry, and appends ``(σ, q, 1)`` otherwise
(``opacus/accountants/rdp.py``, ``RDPAccountant.step``). One step releases the sum of the
clipped per-sample gradients of a Poisson sample (each record in with probability q) plus
N(0, σ²C²·I), C the clipping norm: the sampled Gaussian mechanism with noise multiplier σ
(Abadi et al. 2016, §3.1; its RDP in Mironov, Talwar, Zhang 2019). So ``n`` steps at (σ, q) are
exactly

    SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(σ)), n)

which is dp-accounting's ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), n)``,
the composition Opacus's RDP accountant computes. The server recomputes ε from these events with
its own accountants, whichever accountant Opacus printed its ε with (PRV by default); that ε is
logged beside ours as the round's reported ε, so the run page shows the two.

Each client of a federation trains with its own engine on its own records, so each engine is one
party of the ledger, named by the caller; the run's ε is the largest party's.

What cannot be checked here: Opacus accounts every step as Poisson sampling at q even when the
loader was not Poisson (``make_private(poisson_sampling=False)``, shuffled batches); the events
then record what Opacus assumed, as its own ε does.

This module imports no Opacus: it reads the ``history`` attribute of what it is given, so
``dpfl`` imports without the ``opacus`` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpfl.errors import SpecError
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpfl.track import TrackedRun

__all__ = ["OpacusLedger", "history_events"]

Step = tuple[float, float, int]  # (noise_multiplier σ, sample_rate q, num_steps n), as Opacus keeps it


def history_events(steps: Sequence[Step], *, field: str = "history") -> list[Event]:
    """Returns the ledger events of Opacus history entries, one event per ``(σ, q, n)`` entry.

    q = 1 (every record in every step) is a plain Gaussian: sampling amplifies nothing.

    Raises:
        SpecError: an entry has σ ≤ 0 (a release without noise has no finite ε) or a q outside
            (0, 1], naming ``field`` and the entry.
    """
    out: list[Event] = []
    for i, (noise_multiplier, sample_rate, num_steps) in enumerate(steps):
        if not noise_multiplier > 0:
            raise SpecError(
                f"{field}.{i}",
                f"took {num_steps} steps with noise_multiplier {noise_multiplier!r}: a release without "
                "noise has no finite ε; train this client with noise_multiplier > 0.",
            )
        if not 0 < sample_rate <= 1:
            raise SpecError(f"{field}.{i}", f"has sample_rate {sample_rate!r}; it must be in (0, 1].")
        step: Event = GaussianEvent(float(noise_multiplier))
        if sample_rate < 1:
            step = PoissonSampledEvent(float(sample_rate), step)
        out.append(step if num_steps == 1 else SelfComposedEvent(step, int(num_steps)))
    return out


def _history(engine: Any, field: str) -> list[Step]:
    """Returns the accountant history of a `PrivacyEngine` or of an Opacus accountant."""
    accountant = getattr(engine, "accountant", engine)
    history = getattr(accountant, "history", None)
    if not isinstance(history, list):
        raise SpecError(
            field,
            f"must be an Opacus PrivacyEngine or accountant (with .history); got {type(engine).__name__}.",
        )
    return [tuple(entry) for entry in history]


def _new_steps(before: list[Step], now: list[Step], field: str) -> list[Step]:
    """Returns the steps in `now` that `before` did not hold.

    Opacus only ever adds to the last entry's count or appends an entry, so `now` extends
    `before`: the same entries, the last of them with as many steps or more, then new ones.
    """
    if not before:
        return list(now)
    last = len(before) - 1
    extends = (
        len(now) >= len(before)
        and now[:last] == before[:last]
        and now[last][:2] == before[last][:2]
        and now[last][2] >= before[last][2]
    )
    if not extends:
        raise SpecError(
            field,
            "has an accountant history that does not extend the one logged before (was it reset or "
            "loaded from a state dict?); pass a new engine for this client instead, whose whole "
            "history is then logged.",
        )
    grown = now[last][2] - before[last][2]
    return ([(*now[last][:2], grown)] if grown else []) + list(now[len(before) :])


class OpacusLedger:
    """The releases of Opacus privacy engines, one per client, logged round by round into a run.

    Each `log_round` logs, per client, the steps its engine's accountant recorded since the
    previous round, and the largest ε the engines themselves report as the round's reported ε.
    An engine not seen before for a client (a new `PrivacyEngine` each round, as some federated
    loops make) has its whole history logged; a client whose engine took no step releases nothing.

    Example::

        with track.start_run(algorithm="dp-fedavg (opacus)", dataset="digits", delta=1e-5,
                             reported_by="opacus prv", server=url) as run:
            ledger = OpacusLedger(run)
            for r in range(1, rounds + 1):
                ...  # each client trains with its own PrivacyEngine
                ledger.log_round(r, engines, accuracy=acc)  # engines: client name ↦ PrivacyEngine
    """

    def __init__(self, run: TrackedRun, *, report_epsilon: bool = True):
        """
        Args:
            run: the run `dpfl.track.start_run` opened.
            report_epsilon: also log the engines' own ε at the run's δ (their accountant's, which
                may be PRV, RDP or GDP), shown on the run page beside the server's.
        """
        self.run = run
        self.report_epsilon = report_epsilon
        self._logged: dict[str, tuple[Any, list[Step]]] = {}  # client ↦ (its accountant, history logged)

    def log_round(
        self,
        round: int,
        engines: Mapping[str, Any],
        *,
        accuracy: float | None = None,
        loss: float | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Logs round `round` (numbered from 1): its metrics and each client's new steps; returns what
        the server answered (the run's ε after it), or the round as written to the run's file.

        The steps count as logged only once the round is accepted, so a round the server refused
        (`TrackingError`) can be logged again with the same steps.

        Args:
            engines: client name (a ledger party: letters, digits, ``_``, ``:``, ``-``) ↦ its
                `PrivacyEngine` or Opacus accountant; a client left out this round releases nothing.

        Raises:
            SpecError: an engine is no Opacus engine, its history was reset, or a step had no
                noise, naming the client.
            TrackingError: the server refused the round.
        """
        fresh = self._new(engines)
        events = {party: history_events(steps, field=f"engines.{party}") for party, steps in fresh}
        answer = self.run.log_round(
            round,
            accuracy=accuracy,
            loss=loss,
            metrics=metrics,
            events=events,
            reported_epsilon=self._reported_epsilon(engines),
        )
        for party, engine in engines.items():
            accountant = getattr(engine, "accountant", engine)
            self._logged[party] = (accountant, _history(engine, f"engines.{party}"))
        return answer

    def _new(self, engines: Mapping[str, Any]) -> list[tuple[str, list[Step]]]:
        out = []
        for party, engine in engines.items():
            field = f"engines.{party}"
            now = _history(engine, field)
            accountant, before = self._logged.get(party, (None, []))
            if accountant is not getattr(engine, "accountant", engine):
                before = []  # a new engine for this client: all of its history is new
            steps = _new_steps(before, now, field)
            if steps:
                out.append((party, steps))
        return out

    def _reported_epsilon(self, engines: Mapping[str, Any]) -> float | None:
        """Returns the largest ε the clients' own accountants give at the run's δ, over every client
        logged so far (a client left out of this round still spent what it spent), or None when not
        asked, without δ, or before any step."""
        delta = self.run.description.get("delta")
        if not self.report_epsilon or delta is None:
            return None
        accountants = {party: accountant for party, (accountant, _) in self._logged.items()}
        accountants |= {party: getattr(engine, "accountant", engine) for party, engine in engines.items()}
        spent = [float(a.get_epsilon(delta)) for a in accountants.values() if a.history]
        return max(spent, default=None)

"""`dpfl privacy …`: ε of a schedule, calibration, GDP, votes, group privacy and shuffling.

The accountants are imported by the commands that use them, not here: `dpfl --help` and the
other commands do not pay for dp_accounting and scipy (issue 19: `dpfl --help` under 1 s).
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from dpfl.cli.output import emit
from dpfl.errors import SpecError

app = typer.Typer(help="Privacy accounting without running anything.", no_args_is_help=True)

Table = Annotated[bool, typer.Option("--table", help="Print a table instead of JSON.")]
Delta = Annotated[float, typer.Option("--delta", help="Target δ in (0, 1).")]
Steps = Annotated[int, typer.Option("--steps", help="Number of releases (≥ 1).")]
Rate = Annotated[float, typer.Option("--sampling-rate", help="Poisson sampling rate q in (0, 1].")]
AccountantName = Annotated[
    str, typer.Option("--accountant", help="Accountant name (see `dpfl privacy accountants`).")
]


def _positive(option: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise SpecError(option, f"must be > 0; got {value:g}.")


def _delta(value: float) -> None:
    if not 0 < value < 1:
        raise SpecError("--delta", f"must be in (0, 1); got {value:g}.")


def _schedule(*, steps: int, sampling_rate: float, delta: float) -> None:
    """Refuses a DP-SGD schedule's options out of range, naming the option."""
    _delta(delta)
    if steps < 1:
        raise SpecError("--steps", f"must be an integer ≥ 1; got {steps}.")
    if not 0 < sampling_rate <= 1:
        raise SpecError("--sampling-rate", f"must be in (0, 1]; got {sampling_rate:g}.")


def _accountant(name: str) -> None:
    from dpfl.privacy.accountants import registered_accountants

    if name not in registered_accountants():
        raise SpecError(
            "--accountant", f"must be one of {', '.join(registered_accountants())}; got {name!r}."
        )


@app.command()
def accountants(table: Table = False) -> None:
    """List the accountants and what each one computes."""
    from dpfl.privacy.accountants import accountant_class, registered_accountants

    emit(
        {name: accountant_class(name).description for name in registered_accountants()},
        table=table,
        title="accountants",
    )


@app.command()
def epsilon(
    noise_multiplier: Annotated[
        float, typer.Option("--noise-multiplier", help="σ: noise std ÷ sensitivity.")
    ],
    steps: Steps,
    delta: Delta,
    sampling_rate: Rate = 1.0,
    accountant: AccountantName = "rdp",
    table: Table = False,
) -> None:
    """ε of `steps` Gaussian releases at noise multiplier σ on Poisson samples of rate q."""
    from dpfl.privacy import calibration
    from dpfl.privacy.accountants import make_accountant

    _positive("--noise-multiplier", noise_multiplier)
    _schedule(steps=steps, sampling_rate=sampling_rate, delta=delta)
    _accountant(accountant)
    acc = make_accountant(accountant)
    acc.compose(
        calibration.sgd_event(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate, steps=steps)
    )
    # an approximation (gdp's CLT) may underestimate ε: never printed under the plain name
    result = {
        "epsilon_approximate" if acc.approximate else "epsilon": acc.epsilon(delta),
        "delta": delta,
        "accountant": accountant,
        "noise_multiplier": noise_multiplier,
        "sampling_rate": sampling_rate,
        "steps": steps,
    }
    if acc.notes:
        result |= {"approximate": acc.approximate, "notes": "; ".join(acc.notes)}
    emit(result, table=table, title="ε of a schedule")


@app.command()
def calibrate(
    epsilon: Annotated[float, typer.Option("--epsilon", help="Target ε > 0.")],
    steps: Steps,
    delta: Delta,
    sampling_rate: Rate = 1.0,
    accountant: AccountantName = "rdp",
    table: Table = False,
) -> None:
    """The smallest noise multiplier whose schedule meets the target (ε, δ)."""
    from dpfl.privacy import calibration
    from dpfl.privacy.accountants import headline_problem

    _positive("--epsilon", epsilon)
    _schedule(steps=steps, sampling_rate=sampling_rate, delta=delta)
    _accountant(accountant)

    def schedule(sigma: float):
        return calibration.sgd_event(noise_multiplier=sigma, sampling_rate=sampling_rate, steps=steps)

    # σ is only ever calibrated on a sound, data-independent ε, as for a run's privacy target
    problem = headline_problem(accountant, [schedule(1.0)])
    if problem is not None:
        raise SpecError("--accountant", f"{problem}; got {accountant!r}.")
    sigma = calibration.calibrate_noise_multiplier(
        schedule, target_epsilon=epsilon, target_delta=delta, accountant=accountant
    )
    achieved = calibration.epsilon(schedule(sigma), delta=delta, accountant=accountant)
    emit(
        {
            "noise_multiplier": sigma,
            "epsilon": achieved,
            "target_epsilon": epsilon,
            "delta": delta,
            "accountant": accountant,
            "sampling_rate": sampling_rate,
            "steps": steps,
        },
        table=table,
        title="calibrated noise",
    )


@app.command()
def gdp(
    mu: Annotated[float | None, typer.Option("--mu", help="μ of a μ-GDP guarantee.")] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="δ in (0, 1).")] = None,
    epsilon: Annotated[float | None, typer.Option("--epsilon", help="ε ≥ 0.")] = None,
    table: Table = False,
) -> None:
    """μ-GDP ↔ (ε, δ): give two of --mu, --epsilon, --delta and get the third (exact conversion)."""
    from dpfl.privacy.accountants import gdp_delta, gdp_epsilon, gdp_mu

    given = [name for name, v in (("--mu", mu), ("--epsilon", epsilon), ("--delta", delta)) if v is not None]
    if len(given) != 2:
        raise SpecError(
            "--mu/--epsilon/--delta", f"give exactly two of them; got {', '.join(given) or 'none'}."
        )
    if mu is not None:
        _positive("--mu", mu)
    if delta is not None:
        _delta(delta)
    if epsilon is not None and not epsilon >= 0:
        raise SpecError("--epsilon", f"must be ≥ 0; got {epsilon:g}.")
    if epsilon is None:
        epsilon = float(gdp_epsilon(mu, delta=delta))
    elif delta is None:
        delta = gdp_delta(mu=mu, epsilon=epsilon)
    else:
        mu = gdp_mu(epsilon=epsilon, delta=delta)
    emit({"mu": mu, "epsilon": epsilon, "delta": delta, "accountant": "gdp"}, table=table, title="μ-GDP")


@app.command()
def vote(
    sigma: Annotated[float, typer.Option("--sigma", help="Noise std σ added to each vote count.")],
    queries: Annotated[int, typer.Option("--queries", help="Number of answered queries Q.")],
    delta: Delta,
    level: Annotated[str, typer.Option("--level", help="agent or instance.")] = "agent",
    method: Annotated[
        str, typer.Option("--method", help="ae (one-hot votes) or knn (kNN frequency votes).")
    ] = "ae",
    k: Annotated[int, typer.Option("--k", help="Neighbours per kNN vote (instance level).")] = 1,
    table: Table = False,
) -> None:
    """Data-independent ε of Q noisy-argmax votes (AE-DPFL, kNN-DPFL; voting paper Thm 5)."""
    from dpfl.privacy.accountants import make_accountant
    from dpfl.privacy.events import SelfComposedEvent, VoteEvent
    from dpfl.privacy.gnmax import vote_sensitivity

    _positive("--sigma", sigma)
    _delta(delta)
    if queries < 1:
        raise SpecError("--queries", f"must be an integer ≥ 1; got {queries}.")
    if level not in ("agent", "instance"):
        raise SpecError("--level", f"must be agent or instance; got {level!r}.")
    if method not in ("ae", "knn"):
        raise SpecError("--method", f"must be ae or knn; got {method!r}.")
    if k < 1:
        raise SpecError("--k", f"must be an integer ≥ 1; got {k}.")
    # The algorithms' own sensitivity (reference/003_voting_dpfl.md §3.2): √2/k for instance-level
    # kNN, not the paper's printed √(2/k).
    sensitivity = vote_sensitivity(method, level, k=k)
    event = SelfComposedEvent(VoteEvent(noise_std=sigma, sensitivity=sensitivity), queries)
    results = {}
    for conversion in ("tight", "classic"):
        acc = make_accountant("rdp", conversion=conversion)
        acc.compose(event)
        results[conversion] = acc.epsilon(delta)
    emit(
        {
            "epsilon": results["tight"],
            "epsilon_classic": results["classic"],
            "delta": delta,
            "accountant": "rdp",
            "noise_std": sigma,
            "sensitivity": sensitivity,
            "queries": queries,
            "level": level,
            "method": method,
        },
        table=table,
        title="noisy-argmax votes",
    )


@app.command()
def group(
    noise_multiplier: Annotated[
        float, typer.Option("--noise-multiplier", help="σ of the record-level DP-SGD.")
    ],
    steps: Steps,
    group_size: Annotated[int, typer.Option("--group-size", help="k: the most records one user owns.")],
    delta: Delta,
    sampling_rate: Rate = 1.0,
    table: Table = False,
) -> None:
    """User-level ε of record-level DP-SGD through group privacy (ULDP-GROUP-k)."""
    from dpfl.privacy import calibration
    from dpfl.privacy.accountants import GroupAccountant
    from dpfl.privacy.events import GroupEvent

    _positive("--noise-multiplier", noise_multiplier)
    _schedule(steps=steps, sampling_rate=sampling_rate, delta=delta)
    if group_size < 1:
        raise SpecError("--group-size", f"must be an integer ≥ 1; got {group_size}.")
    record = calibration.sgd_event(
        noise_multiplier=noise_multiplier, sampling_rate=sampling_rate, steps=steps
    )
    acc = GroupAccountant()
    acc.compose(GroupEvent(record, group_size))
    routes = acc.routes(delta)
    emit(
        {
            "epsilon": min(routes.values()),
            "epsilon_rdp_route": routes["rdp"],
            "epsilon_dp_route": routes["dp"],
            "epsilon_record_level": calibration.epsilon(record, delta=delta),
            "delta": delta,
            "accountant": "group",
            "group_size": group_size,
            "noise_multiplier": noise_multiplier,
            "sampling_rate": sampling_rate,
            "steps": steps,
        },
        table=table,
        title="group privacy",
    )


@app.command(name="shuffle")
def shuffle_(
    local_epsilon: Annotated[
        float, typer.Option("--local-epsilon", help="ε₀ of each user's local randomizer.")
    ],
    users: Annotated[int, typer.Option("--users", help="Number of users n shuffled together.")],
    delta: Delta,
    table: Table = False,
) -> None:
    """Central ε of n shuffled ε₀-LDP reports (Feldman, McMillan & Talwar 2021, numerical)."""
    from dpfl.privacy import shuffle

    _positive("--local-epsilon", local_epsilon)
    _delta(delta)
    if users < 1:
        raise SpecError("--users", f"must be an integer ≥ 1; got {users}.")
    eps = shuffle.shuffle_epsilon(delta=delta, local_epsilon=local_epsilon, num_users=users)
    emit(
        {
            "epsilon": eps,
            "delta": delta,
            "accountant": "shuffle",
            "local_epsilon": local_epsilon,
            "num_users": users,
        },
        table=table,
        title="shuffle amplification",
    )

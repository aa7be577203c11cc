"""Rules and queries for runs. Services flush; the request or task that called them commits."""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend import budgets
from backend.datasets.service import check_dataset_files
from backend.errors import Conflict, NotFound, ParameterError
from backend.models import CLAIMED, BudgetCharge, LedgerEventRow, RoundMetric, Run, RunSource, RunStatus
from backend.privacy import bounded
from backend.runs import settled
from backend.runs.schemas import LedgerRead, Projection
from backend.settings import Settings
from dpfl import runner
from dpfl.errors import DpflError, SpecError, UnknownNameError
from dpfl.privacy.accountants import accountant_class, make_accountant
from dpfl.spec import PrivacySpec, RunSpec

__all__ = [
    "ATTEMPT_RESET",
    "Admission",
    "add_run",
    "admit",
    "cancel_run",
    "check_accountant",
    "check_limits",
    "create_run",
    "delete_run",
    "get_run",
    "keyed_run",
    "ledger",
    "metrics",
    "patch_run",
    "planned_privacy",
    "project",
    "released_epsilon",
    "requeue_stale",
    "reservation",
]

# What one attempt at a run shows of its progress; a new attempt starts it afresh (a re-queued
# run is not part done, and the next worker's rounds would otherwise show over the lost ones).
# `epsilon` stays: the lost attempt's releases are in the ledger and a failure settles on it.
ATTEMPT_RESET: dict[str, Any] = {
    "current_round": 0,
    "progress": 0.0,
    "final_accuracy": None,
    "final_loss": None,
    "finished_at": None,
}


def check_limits(spec: RunSpec, settings: Settings) -> None:
    """Refuses specs beyond the server's limits, naming the field (422)."""
    check_dataset_files(spec, settings)
    if spec.rounds > settings.max_rounds:
        raise SpecError("rounds", f"must be ≤ {settings.max_rounds} on this server; got {spec.rounds}.")
    if spec.dataset.silos > settings.max_silos:
        raise SpecError(
            "dataset.silos", f"must be ≤ {settings.max_silos} on this server; got {spec.dataset.silos}."
        )
    if spec.rounds * spec.dataset.silos > settings.max_party_rounds:  # each silo's ε is accounted per round
        raise SpecError(
            "rounds",
            f"× dataset.silos must be ≤ {settings.max_party_rounds} on this server (DPFL_MAX_PARTY_ROUNDS); "
            f"got {spec.rounds} × {spec.dataset.silos} = {spec.rounds * spec.dataset.silos}.",
        )


def planned_privacy(spec: RunSpec, settings: Settings, *, protected: bool = False) -> runner.Privacy:
    """Returns the spec's projection (`dpfl.runner.projected`): σ and the planned ε per round, every
    check the run's setup makes on its data, calibrating σ for an ε target (loads the data).

    Raises:
        SpecError: what the worker would refuse, naming the field (422); among others when the
            accountant's arithmetic fails on the spec's numbers (σ = 1e-300 divides by zero).

    Runs in the API's projection process, bounded in time and memory (backend/privacy/bounded.py).
    """
    try:
        return _planned(
            spec,
            protected,
            tuple(settings.data_dirs),
            settings.cache_dir,
            settings.projection_timeout_s,
            settings.projection_memory_mb * 2**20,
        )
    except DpflError:
        raise
    except (ArithmeticError, ValueError) as exc:  # ZeroDivisionError, OverflowError, math domain errors
        raise _unaccountable(spec, exc) from exc


def _unaccountable(spec: RunSpec, exc: Exception) -> SpecError:
    privacy = spec.privacy
    if privacy is None:
        return SpecError("privacy", f"cannot be projected ({type(exc).__name__}: {exc}).")
    target = privacy.target
    return SpecError(
        target.field,
        f"is outside what the {privacy.accountant!r} accountant can compute; got {target.value!r} "
        f"({type(exc).__name__}: {exc})"
        + ("; give a larger σ." if target.kind == "noise_multiplier" else "."),
    )


@functools.lru_cache(maxsize=32)
def _planned(
    spec: RunSpec,
    protected: bool,
    data_dirs: tuple[Path, ...],
    cache_dir: Path,
    timeout_s: float,
    memory_bytes: int,
) -> runner.Privacy:
    # Cached: a sweep submits many specs over the same data, and the new-run form asks again
    # for the same spec as the user edits other fields; a spec is hashable. Errors are not cached.
    return bounded.call(
        _project, spec, protected, data_dirs, cache_dir, timeout_s=timeout_s, memory_bytes=memory_bytes
    )


def _project(spec: RunSpec, protected: bool, data_dirs: tuple[Path, ...], cache_dir: Path) -> runner.Privacy:
    return runner.projected(spec, data_dirs=data_dirs, cache_dir=cache_dir, protected=protected)


def project(spec: RunSpec, settings: Settings, *, protected: bool = False) -> Projection:
    """Returns the run's noise multiplier and projected ε, without running it: the one projection
    (`dpfl.runner.projected`) that its worker computes too, so what the worker would refuse is
    refused here, naming the field."""
    runner.check(spec)  # its first step, needing no data: refused here without a projection process
    plan = planned_privacy(spec, settings, protected=protected)
    privacy = spec.privacy
    return Projection(
        notion=plan.notion,
        epsilon=None if privacy is None else plan.planned_epsilon[-1] if plan.planned_epsilon else 0.0,
        noise_multiplier=plan.noise_multiplier,
        delta=None if privacy is None else privacy.delta,
        accountant=None if privacy is None else privacy.accountant,
        planned_epsilon=plan.planned_epsilon,
        bound_epsilon=plan.bound_epsilon,
        uncovered=runner.uncovered(plan, spec.dataset),
        implausible=plan.implausible,
    )


@dataclass(frozen=True)
class Admission:
    """A spec checked and projected (`admit`), ready to be added as a queued run (`add_run`)."""

    spec: RunSpec
    dataset: str  # the name its data is shown under (`budgets.budget_name`)
    budget: str | None  # the budget on the records it reads (`budgets.covering`), if any
    projection: Projection

    @property
    def protected(self) -> bool:
        return self.budget is not None


def admit(session: Session, *, spec: RunSpec, settings: Settings) -> Admission:
    """Returns the spec validated and projected; reads only, so the slow part (the projection
    loads the data and runs the accountant) holds no write lock (SQLite has one for all)."""
    check_limits(spec, settings)
    budget = budgets.covering(session, spec, settings)
    if budget is not None:
        _check_protected(spec, budget)
    projection = project(spec, settings, protected=budget is not None)
    if budget is not None:
        budgets.check_bounded(session, budget=budget, spec=spec, uncovered=projection.uncovered)
    return Admission(
        spec=spec, dataset=budgets.budget_name(spec, settings), budget=budget, projection=projection
    )


def add_run(
    session: Session,
    admission: Admission,
    *,
    sweep_id: str | None = None,
    batch_id: str | None = None,
    idempotency_key: str | None = None,
) -> Run:
    """Adds the admitted run, queued, and reserves its projected ε against its dataset's budget.

    Raises IntegrityError when another run holds `idempotency_key` (a concurrent retry)."""
    spec, projection, privacy = admission.spec, admission.projection, admission.spec.privacy
    dataset = admission.dataset
    run = Run(
        status=RunStatus.queued,
        algorithm=spec.algorithm,
        dataset=dataset,
        sweep_id=sweep_id,
        batch_id=batch_id,
        spec=runner.resolved(spec).to_json(),  # its defaults written out: the values it ran with
        rounds=spec.rounds,
        notion=projection.notion,
        target_epsilon=None if privacy is None else privacy.epsilon,
        projected_epsilon=projection.epsilon,
        delta=None if privacy is None else privacy.delta,
        accountant=None if privacy is None else privacy.accountant,
        noise_multiplier=projection.noise_multiplier,
        protected=admission.protected,
        idempotency_key=idempotency_key,
    )
    session.add(run)
    session.flush()
    if admission.budget is not None and privacy is not None:
        budgets.reserve(session, run=run, budget=admission.budget, epsilon=reservation(privacy, projection))
    return run


def reservation(privacy: PrivacySpec, projection: Projection) -> float:
    """Returns the ε a protected run reserves of its budget: an ε target its σ is calibrated to (the
    worker calibrates on its own secret draws, and meets the target whatever they are), else the
    most any of its draws can plan (`bound_epsilon`). Its worker re-checks it against the draws
    it made before releasing anything (`budgets.secure`)."""
    if privacy.target.kind == "epsilon" and privacy.calibration == "accountant":
        return privacy.epsilon
    return projection.bound_epsilon if projection.bound_epsilon is not None else projection.epsilon


def create_run(
    session: Session, *, spec: RunSpec, settings: Settings, idempotency_key: str | None = None
) -> Run:
    """Validates, projects and admits a run against its dataset's budget; returns the queued row."""
    admission = admit(session, spec=spec, settings=settings)
    return add_run(session, admission, idempotency_key=idempotency_key)


def keyed_run(session: Session, key: str, spec: RunSpec) -> Run | None:
    """Returns the run an earlier POST created under `key`, or None.

    Raises:
        ParameterError: the key was used for another spec (422 naming the header).
    """
    run = session.scalar(select(Run).where(Run.idempotency_key == key))
    if run is not None and run.spec != runner.resolved(spec).to_json():
        raise ParameterError(
            "header",
            "Idempotency-Key",
            f"was used for run {run.id!r} with another spec; a retry must send the same spec, "
            "a new run a new key.",
        )
    return run


def _check_protected(spec: RunSpec, name: str) -> None:
    """Refuses what a protected dataset (one with a budget) must not run: a non-private algorithm
    (its model is released without noise) or seeded noise (regenerable from the spec)."""
    if spec.privacy is None:
        raise Conflict(
            f"dataset {name!r} has a privacy budget, so only private runs may use it; "
            f"{spec.algorithm} is not private (it would release a model without noise)"
        )
    try:
        runner.noise_source(spec, protected=True)
    except SpecError as exc:
        raise Conflict(str(exc)) from None


def get_run(session: Session, run_id: str) -> Run:
    """Returns the run; raises NotFound (404) naming the id."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"run {run_id!r} does not exist")
    return run


def cancel_run(session: Session, run_id: str) -> Run:
    """Cancels a queued or external run at once (refunding a reservation) or asks a running one to stop."""
    run = get_run(session, run_id)
    if RunStatus(run.status).finished:
        raise Conflict(
            f"run {run_id!r} is already {run.status}; only queued or running runs can be cancelled"
        )
    if run.status == RunStatus.queued or run.source == RunSource.external:
        # an external run has no worker to ask: it ends here, and takes no more rounds
        run.status = RunStatus.cancelled
        run.finished_at = dt.datetime.now(dt.UTC)
        budgets.settle(session, run_id=run.id, spent=0.0)
    else:
        run.cancel_requested = True
    session.flush()
    return run


def delete_run(session: Session, run_id: str) -> None:
    """Deletes a finished run with its metrics and ledger; refuses a live one, or one that spent
    privacy budget (409): its charge would go with it, and privacy loss is permanent."""
    run = get_run(session, run_id)
    if not RunStatus(run.status).finished:
        raise Conflict(f"run {run_id!r} is {run.status}; cancel it and wait for it to finish before deleting")
    charge = session.get(BudgetCharge, run_id)
    if charge is not None and (charge.spent or 0) > 0:
        raise Conflict(
            f"run {run_id!r} spent ε {charge.spent:.4g} of dataset {charge.dataset!r}'s privacy budget; "
            "deleting it would forget that spending, so archive it instead (PATCH archived: true)"
        )
    session.delete(run)
    session.flush()


def patch_run(session: Session, run_id: str, *, changes: dict[str, Any]) -> Run:
    """Sets the run's name, tags, notes or archived flag (whichever `changes` holds); returns it.

    Any run may be annotated, whatever its status: these fields are the user's, not the worker's.
    """
    run = get_run(session, run_id)
    for name, value in changes.items():
        setattr(run, name, value)
    session.flush()
    return run


def metrics(session: Session, run_id: str) -> Sequence[RoundMetric]:
    """Returns the run's evaluated rounds in order."""
    get_run(session, run_id)
    return session.scalars(
        select(RoundMetric).where(RoundMetric.run_id == run_id).order_by(RoundMetric.round)
    ).all()


def check_accountant(accountant: str | None) -> None:
    """Refuses an accountant that is not registered (422 naming `accountant`); None or "": the run's own."""
    if accountant:
        try:
            accountant_class(accountant)
        except UnknownNameError as exc:
            raise ParameterError("query", "accountant", str(exc)) from None


def ledger(session: Session, run_id: str, *, accountant: str | None, delta: float | None) -> LedgerRead:
    """Returns the run's ledger recomputed by `accountant` at `delta` (defaults: the run's own);
    a finished run's ε curves are computed once per accountant and δ (`settled.kept`)."""
    run = get_run(session, run_id)
    rows = session.scalars(
        select(LedgerEventRow)
        .where(LedgerEventRow.run_id == run_id)
        .order_by(LedgerEventRow.round, LedgerEventRow.party)
    ).all()
    delta = delta or run.delta or 1e-5
    check_accountant(accountant)
    if run.protected and accountant == "pate":
        raise Conflict(
            f"run {run_id!r} is protected: the data-dependent ε (`pate`) reads the noiseless votes, a "
            "diagnostic withheld for datasets with a budget; use `rdp` or `pld`"
        )
    accounted = settled.kept(
        session,
        run,
        view="ledger",
        accountant=accountant or "",
        delta=delta,
        compute=lambda: _accounted(run, rows, accountant=accountant, delta=delta),
    )
    return LedgerRead(
        **accounted, events=[{"round": r.round, "party": r.party, "events": r.events} for r in rows]
    )


def _accounted(
    run: Run, rows: Sequence[LedgerEventRow], *, accountant: str | None, delta: float
) -> dict[str, Any]:
    """Returns the ledger's ε curves by `accountant` at `delta` and what labels them: the
    `LedgerRead` fields but its rows, as JSON (what `settled.kept` stores)."""
    # The served events are the public ones; only the accountant reads the withheld fields.
    book = LedgerEventRow.ledger(rows)
    events = list(book.party_events().values())
    if not accountant:  # the default is the run's headline ε, which settles its budget charge
        accountant = book.headline_accountant(run.accountant)
    try:
        curves = book.epsilon_curves(delta=delta, accountant=accountant)
    except DpflError:
        raise
    except (ArithmeticError, ValueError) as exc:  # the accountant's arithmetic on these releases
        raise ParameterError(
            "query",
            "accountant",
            f"{accountant!r} cannot compute this run's ε ({type(exc).__name__}: {exc}).",
        ) from exc
    finite = [float(c[-1]) for c in curves.values() if len(c)]
    # Any accountant may recompute a ledger, but a number that is not a sound, data-independent
    # bound says so: never a plain ε.
    probe = make_accountant(accountant)
    approximations = [why for e in events if (why := probe.approximation(e)) is not None]
    return {
        "accountant": accountant,
        "delta": delta,
        "epsilon": max(finite) if finite else None,
        "approximate": bool(approximations),
        "data_dependent": probe.data_dependent,
        "notes": list(dict.fromkeys([*probe.notes, *approximations])),
        "rounds": book.rounds,
        "parties": {p: [float(x) if math.isfinite(x) else None for x in c] for p, c in curves.items()},
    }


def requeue_stale(session: Session, *, settings: Settings) -> list[str]:
    """Re-queues running runs whose worker stopped sending heartbeats; fails those tried too often,
    and protected runs that released anything: a new attempt would draw fresh noise from a secret
    key, and its rows would take the place of releases already served (a simulation's re-run
    replays the same noise from its seed). A failed run is charged what its ledger holds.

    Returns the ids to send to the queue again (after the caller commits).
    """
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=settings.heartbeat_timeout_s)
    stale = session.scalars(
        select(Run)
        # an external run has no worker (and no heartbeat): its own code ends it
        .where(Run.status.in_(CLAIMED), Run.source == RunSource.native, Run.heartbeat_at < cutoff)
        .with_for_update(skip_locked=True)
    ).all()
    again = []
    for run in stale:
        released = run.protected and (
            session.scalar(select(LedgerEventRow.round).where(LedgerEventRow.run_id == run.id).limit(1))
            is not None
        )
        if released or run.attempts >= settings.max_attempts:
            spent = released_epsilon(session, run)
            run.status = RunStatus.failed
            run.finished_at = dt.datetime.now(dt.UTC)
            run.epsilon = spent
            run.error = (
                f"worker lost after round {run.current_round} (last: {run.worker}): a protected run is "
                "not re-run, since a new attempt would draw fresh noise; it is charged the ε its "
                f"recorded rounds released ({spent:.4g})"
                if released
                else f"worker lost: {run.attempts} workers stopped sending heartbeats while running it "
                f"(last: {run.worker})"
            )
            budgets.settle(session, run_id=run.id, spent=spent)
        else:
            session.execute(
                update(Run)
                .where(Run.id == run.id)
                .values(
                    status=RunStatus.queued,
                    worker=None,
                    cancel_requested=run.cancel_requested,
                    dispatched_at=None,  # the caller sends it (backend.dispatch.send)
                    **ATTEMPT_RESET,
                )
            )
            again.append(run.id)
    session.flush()
    return again


def released_epsilon(session: Session, run: Run) -> float:
    """Returns the ε of what a run that did not finish released (its ledger, recomputed); 0 when
    it released nothing."""
    book = LedgerEventRow.run_ledger(session, run.id)
    return book.headline_epsilon(accountant=run.accountant, delta=run.delta or 1e-5) if book.rounds else 0.0

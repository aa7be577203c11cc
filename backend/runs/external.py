"""Runs executed elsewhere: created from a description, rounds appended, ended; ε recomputed here.

An external run is never queued, dispatched, audited or re-run: we have neither its code nor
its data. What it logs is its ledger as reported (`dpfl.external`), stored in the same tables as
a run of ours, and its ε is recomputed from those events by the same ledger and accountants
(`LedgerEventRow.run_ledger`, `Ledger.headline_epsilon`), after every round. The ε its tool
reported is kept beside ours and flagged when it is smaller than our accountant's.

Services flush; the request commits.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db import utcnow
from backend.errors import Conflict, ParameterError
from backend.models import LedgerEventRow, RoundMetric, Run, RunSource, RunStatus
from backend.runs.service import get_run
from backend.settings import Settings
from dpfl.errors import DpflError, SpecError
from dpfl.external import ExternalRun, ReportedRound, RunEnd
from dpfl.privacy.disclosure import Caveat
from dpfl.privacy.events import Event, public_event, to_json, withheld_fields

__all__ = [
    "REPORTED_CAVEAT",
    "append_round",
    "create_external",
    "external_spec",
    "finish_external",
    "import_external",
    "keyed_external",
    "underreported",
]

REPORTED_CAVEAT = (
    "ledger as reported: this run was executed outside DP-FL Explorer, and its ε is recomputed here "
    "from the releases its code reported; nobody here has its code or data to check them against, "
    "so it is never audited or re-run"
)


def external_spec(description: ExternalRun) -> dict[str, Any]:
    """Returns the spec an external run is stored with: RunSpec's shape where it has one
    (`dataset.name`, `privacy.delta`), so the runs list's filters and Compare's configurations
    read it like a run of ours."""
    private = description.notion != "none"
    return {
        "source": RunSource.external.value,
        "algorithm": description.algorithm,
        "dataset": {"name": description.dataset},
        "notion": description.notion,
        "privacy": {"delta": description.delta, "accountant": description.accountant} if private else None,
        "rounds": description.rounds,
        "params": description.params,
        "reported_by": description.reported_by,
    }


def create_external(
    session: Session, *, description: ExternalRun, settings: Settings, idempotency_key: str | None = None
) -> Run:
    """Adds an external run, running (its rounds arrive as it trains); returns it.

    Raises IntegrityError when another run holds `idempotency_key` (a concurrent retry)."""
    if description.rounds is not None and description.rounds > settings.max_rounds:
        raise SpecError(
            "rounds", f"must be ≤ {settings.max_rounds} on this server; got {description.rounds}."
        )
    private = description.notion != "none"
    run = Run(
        idempotency_key=idempotency_key,
        source=RunSource.external,
        status=RunStatus.running,
        algorithm=description.algorithm,
        dataset=description.dataset,
        spec=external_spec(description),
        rounds=description.rounds or 0,
        notion=description.notion,
        delta=description.delta if private else None,
        accountant=description.accountant if private else None,
        epsilon=0.0 if private else None,
        reported_epsilon=description.reported_epsilon,
        name=description.name,
        started_at=utcnow(),
        caveats=[Caveat("reported", REPORTED_CAVEAT).to_json()],
    )
    session.add(run)
    session.flush()
    _recount(session, run)
    return run


def keyed_external(session: Session, key: str, description: ExternalRun) -> Run | None:
    """Returns the run an earlier POST created under `key`, or None; refuses a key used for
    another description (422 naming the header)."""
    run = session.scalar(select(Run).where(Run.idempotency_key == key))
    if run is not None and run.spec != external_spec(description):
        raise ParameterError(
            "header",
            "Idempotency-Key",
            f"was used for run {run.id!r} with another description; a retry must send the same one, "
            "a new run a new key.",
        )
    return run


def _external(session: Session, run_id: str, *, live: bool) -> Run:
    """Returns the external run, locked; refuses a native one, or a finished one when `live` (409)."""
    run = session.scalar(select(Run).where(Run.id == run_id).with_for_update()) or get_run(session, run_id)
    if run.source != RunSource.external:
        raise Conflict(
            f"run {run_id!r} was run by this server's workers from its spec; only external runs "
            "(POST /api/runs with source: external) take rounds and an end"
        )
    if live and RunStatus(run.status).finished:
        raise Conflict(f"run {run_id!r} is {run.status}; a finished run takes no more rounds")
    return run


def _stored(
    run_id: str, reported: ReportedRound, releases: dict[str, list[Event]]
) -> tuple[dict, list[dict]]:
    """Returns the round's metric row and ledger rows as the tables hold them."""
    metric = {
        "run_id": run_id,
        "round": reported.round,
        "accuracy": reported.accuracy,
        "loss": reported.loss,
        "epsilon": None,
        "metrics": None,
        # other numbers an external tool reports are shown as reported, labelled not private
        "diagnostics": dict(reported.metrics) or None,
    }
    ledger = [
        {
            "run_id": run_id,
            "round": reported.round,
            "party": party,
            "events": [to_json(public_event(e)) for e in events],
            "withheld": (lambda w: w if any(x is not None for x in w) else None)(
                [withheld_fields(e) for e in events]
            ),
        }
        for party, events in releases.items()
        if events
    ]
    return metric, ledger


def append_round(
    session: Session,
    run_id: str,
    *,
    reported: ReportedRound,
    releases: dict[str, list[Event]],
    settings: Settings,
    recount: bool = True,
) -> tuple[RoundMetric, bool]:
    """Stores one reported round and recomputes the run's ε (unless not `recount`: an import
    accounts all its rounds at once); returns its metric row and whether it was stored before (a
    retried POST of the same round, which changes nothing).

    Raises:
        Conflict: the round number was stored with other values, or is not after the last one
            (rounds are appended in order, so each round's ε is final when it is stored) (409).
        SpecError: the run would pass the server's limits on rounds or parties (422).
    """
    run = _external(session, run_id, live=False)
    metric, ledger = _stored(run.id, reported, releases)
    earlier = session.scalar(
        select(RoundMetric).where(RoundMetric.run_id == run.id, RoundMetric.round == reported.round)
    )
    if earlier is not None:
        if _same(session, earlier, metric, ledger):
            return earlier, True
        raise Conflict(
            f"round {reported.round} of run {run_id!r} was recorded with other metrics or events; "
            "a retry must send the same round, a new round a new number"
        )
    if RunStatus(run.status).finished:
        raise Conflict(f"run {run_id!r} is {run.status}; a finished run takes no more rounds")
    if reported.round <= run.current_round:
        raise Conflict(
            f"round {reported.round} of run {run_id!r} comes after round {run.current_round}; "
            "rounds are appended in increasing order"
        )
    if reported.round > settings.max_rounds:
        raise SpecError("round", f"must be ≤ {settings.max_rounds} on this server; got {reported.round}.")
    if len(ledger) > settings.max_silos:
        raise SpecError(
            "events",
            f"must hold ≤ {settings.max_silos} parties on this server (DPFL_MAX_SILOS); got {len(ledger)}.",
        )
    if run.notion == "none" and ledger:
        raise SpecError(
            "events", f"must be empty for a run with notion 'none'; got releases of {len(ledger)} parties."
        )
    row = RoundMetric(**metric)
    session.add(row)
    session.add_all(LedgerEventRow(**r) for r in ledger)
    session.flush()
    run.current_round = reported.round
    run.rounds = max(run.rounds, reported.round)
    run.progress = reported.round / run.rounds
    if reported.accuracy is not None or reported.loss is not None:
        run.final_accuracy, run.final_loss = reported.accuracy, reported.loss
    if reported.reported_epsilon is not None:
        run.reported_epsilon = reported.reported_epsilon
    if recount:
        row.epsilon = _recount(session, run, field="events")
    session.flush()
    return row, False


def _same(session: Session, earlier: RoundMetric, metric: dict, ledger: list[dict]) -> bool:
    """Returns whether a stored round holds exactly the metric and ledger rows sent again."""
    mine = {k: getattr(earlier, k) for k in ("accuracy", "loss", "diagnostics")}
    if mine != {k: metric[k] for k in mine}:
        return False
    rows = session.scalars(
        select(LedgerEventRow).where(
            LedgerEventRow.run_id == earlier.run_id, LedgerEventRow.round == earlier.round
        )
    ).all()
    stored = {r.party: (r.events, r.withheld) for r in rows}
    return stored == {r["party"]: (r["events"], r["withheld"]) for r in ledger}


def _recount(session: Session, run: Run, *, field: str = "events") -> float | None:
    """Recomputes the run's ε from its whole ledger by its accountant (the one computation every
    run's ε goes through) and the caveats and warning that compare it with the reported ε; returns ε.

    Raises:
        SpecError: the accountant cannot account these releases, naming `field` (422).
    """
    if run.notion == "none":
        return None
    book = LedgerEventRow.run_ledger(session, run.id)
    try:
        epsilon = (
            book.headline_epsilon(accountant=run.accountant, delta=run.delta or 1e-5) if book.rounds else 0.0
        )
    except DpflError as exc:
        raise SpecError(field, f"cannot be accounted by {run.accountant!r}: {exc}") from None
    except (ArithmeticError, ValueError) as exc:
        raise SpecError(
            field, f"cannot be accounted by {run.accountant!r} ({type(exc).__name__}: {exc})."
        ) from None
    run.epsilon = epsilon
    run.warning = underreported(
        run.reported_epsilon, epsilon, accountant=book.headline_accountant(run.accountant)
    )
    return epsilon


def underreported(reported: float | None, epsilon: float | None, *, accountant: str) -> str | None:
    """Returns the warning for a reported ε smaller than our sound accountant's for the same
    releases (None when it is not, or either is unknown).

    A relative tolerance of 1e-9 keeps a tool that runs the same accountant from being flagged
    for its last digits; a tighter sound accountant (PLD, PRV) may legitimately report less
    than RDP, which the text says.
    """
    if reported is None or epsilon is None or not math.isfinite(epsilon):
        return None
    if reported >= epsilon * (1 - 1e-9):
        return None
    return (
        f"the ε its tool reported ({reported:.4g}) is smaller than {accountant!r}'s ε for the same "
        f"releases ({epsilon:.4g}): check its accounting (a tighter sound accountant such as pld "
        "may give less; see the ledger with another accountant)"
    )


def finish_external(session: Session, run_id: str, *, end: RunEnd) -> Run:
    """Ends the external run (succeeded, failed or cancelled); the same end sent again changes
    nothing, another end of a finished run is a 409."""
    run = _external(session, run_id, live=False)
    if RunStatus(run.status).finished:
        if run.status == end.status and (end.reported_epsilon in (None, run.reported_epsilon)):
            return run
        raise Conflict(f"run {run_id!r} ended {run.status} already; an end is sent once")
    run.status = end.status
    run.error = end.error
    run.finished_at = utcnow()
    if end.status == RunStatus.succeeded:
        run.progress = 1.0
        run.rounds = run.current_round or run.rounds
    if end.reported_epsilon is not None:
        run.reported_epsilon = end.reported_epsilon
    _recount(session, run)
    session.flush()
    return run


def import_external(
    session: Session,
    *,
    description: ExternalRun,
    rounds: list[tuple[ReportedRound, dict[str, list[Event]]]],
    end: RunEnd | None,
    settings: Settings,
) -> Run:
    """Adds a whole external run (as `dpfl.track` writes it without a server) in one transaction:
    an error in any round stores nothing of it."""
    run = create_external(session, description=description, settings=settings)
    rows = []
    for i, (reported, releases) in enumerate(rounds):
        try:
            rows.append(
                append_round(
                    session, run.id, reported=reported, releases=releases, settings=settings, recount=False
                )[0]
            )
        except SpecError as exc:
            raise SpecError(f"rounds.{i}.{exc.field}", exc.reason) from None
    _recount(session, run, field="rounds")
    if rows and run.notion != "none":  # ε after each round, in one pass over the ledger
        book = LedgerEventRow.run_ledger(session, run.id)
        curve = book.epsilon_by_round(
            delta=run.delta,
            accountant=book.headline_accountant(run.accountant),
            after=[r.round for r in rows],
        )
        for row, epsilon in zip(rows, curve.tolist(), strict=True):
            row.epsilon = epsilon
    if end is not None:
        finish_external(session, run.id, end=end)
    return run

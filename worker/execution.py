"""A run's life in a worker: claim it, start and train it through `dpfl.runner`, record every round.

The runs of a batch (`Run.batch_id`) are claimed together and trained together
(`runner.train`); each keeps its own rows, progress, cancel flag and outcome, and a run that
fails to start fails alone. Metrics and ledger rows are upserted on (run, round[, party]), so a
run that is re-queued after its worker died and runs again writes nothing twice. A heartbeat
thread keeps the rows' `heartbeat_at` fresh; the API re-queues runs whose heartbeat stops.

A claimed run is `preparing` (its phase says what it does) until its start is done, then
`running`. Cancel reaches it within about a second in either (`worker.interrupt`): the heartbeat
thread reads the cancel flags and interrupts a start or a round whose runs are all cancelled;
a round blocked in C, which the interrupt cannot reach, is recorded cancelled after STUCK_S and
its pool process ended.

Every write is fenced by the attempt this worker claimed: a worker that was only slow, whose run
was re-queued (and perhaps claimed by another) meanwhile, writes nothing more to it and stops
training it, so a re-queued run never shows a lost attempt's rounds or outcome.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from backend import budgets
from backend.datasets.service import check_dataset_files
from backend.db import Database, is_locked, utcnow
from backend.errors import Conflict
from backend.models import CLAIMED, Budget, BudgetCharge, LedgerEventRow, RoundMetric, Run, RunStatus
from backend.runs.service import ATTEMPT_RESET, ledger, released_epsilon
from backend.settings import Settings
from dpfl import runner
from dpfl.errors import DpflError
from dpfl.privacy.events import public_event, to_json, withheld_fields
from dpfl.spec import RunSpec, parse_spec
from worker import logs
from worker.interrupt import Interrupter, RunCancelled

__all__ = ["claim", "claim_batch", "execute", "execute_many"]

log = logging.getLogger(__name__)
HEARTBEAT_S = 5.0
CANCEL_POLL_S = 1.0  # how often the heartbeat thread reads its runs' cancel flags
STUCK_S = 10.0  # how long a raised cancel may take to land before the pool process is ended
EXIT_STUCK = 70
LOCKED_RETRY_MAX_S = 2.0
T = TypeVar("T")


def _written(database: Database, run_id: str, write: Callable[[Session], T]) -> T:
    """Returns what `write` returns, run in a transaction of its own, again for as long as SQLite
    says the database is locked: another process's long write (a large submission) may delay a
    round's record, never lose it (a round that failed to record failed the run's attempt, and
    the next attempt redid every round)."""
    delay = 0.05
    while True:
        try:
            with database.session() as session:
                return write(session)
        except OperationalError as exc:
            if not is_locked(exc):
                raise
            log.warning("%s: the database is locked by another writer; retrying in %.2f s", run_id, delay)
            time.sleep(delay)
            delay = min(2 * delay, LOCKED_RETRY_MAX_S)


def claim(database: Database, run_id: str, *, worker: str) -> bool:
    """Moves the run queued → running in one UPDATE, its progress afresh; False if another
    delivery got it first."""
    return _written(database, run_id, lambda session: _claim(session, run_id, worker=worker))


def claim_batch(database: Database, batch_id: str, *, worker: str) -> list[str]:
    """Returns the ids of the batch's runs this call moved queued → running, in creation order."""

    def take(session: Session) -> list[str]:
        queued = session.scalars(
            select(Run.id)
            .where(Run.batch_id == batch_id, Run.status == RunStatus.queued)
            .order_by(Run.created_at, Run.id)
        ).all()
        return [run_id for run_id in queued if _claim(session, run_id, worker=worker)]

    return _written(database, batch_id, take)


def _claim(session: Session, run_id: str, *, worker: str) -> bool:
    now = utcnow()
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status == RunStatus.queued)
        .values(
            status=RunStatus.preparing,
            phase=None,
            worker=worker,
            started_at=now,
            heartbeat_at=now,
            attempts=Run.attempts + 1,
            error=None,
            **ATTEMPT_RESET,
        )
    )
    return result.rowcount == 1


def _upsert(session: Session, model, rows: list[dict[str, Any]], keys: list[str]) -> None:
    if not rows:
        return
    insert = pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(model).values(rows)
    updates = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
    session.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates))


def _metric_rows(run_id: str, records: list[runner.RoundRecord]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "round": r.round,
            "accuracy": r.accuracy,
            "balanced_accuracy": r.balanced_accuracy,
            "loss": r.loss,
            "epsilon": r.epsilon,
            "metrics": r.metrics,
            "diagnostics": r.diagnostics or None,
        }
        for r in records
    ]


def _held(run_id: str, attempt: int):
    """Returns the condition that this attempt still holds the run: preparing or running, and not
    re-claimed."""
    return and_(Run.id == run_id, Run.status.in_(CLAIMED), Run.attempts == attempt)


def _hold(session: Session, run_id: str, attempt: int) -> bool:
    """Returns whether the attempt still holds the run, touching its heartbeat if so. The UPDATE
    locks the row until the transaction ends, so the reaper cannot re-queue it in between."""
    return (
        session.execute(update(Run).where(_held(run_id, attempt)).values(heartbeat_at=utcnow())).rowcount == 1
    )


def _attempts(database: Database, run_ids: list[str]) -> dict[str, int]:
    """Returns the attempt number of each run this worker has just claimed."""
    with database.session() as session:
        rows = session.execute(select(Run.id, Run.attempts).where(Run.id.in_(run_ids))).all()
    return dict(rows)


class _Heartbeat(threading.Thread):
    """Beats for the task's runs every `every_s`, and reads their cancel flags every second,
    interrupting the task's section when all of its runs are cancelled."""

    def __init__(self, database: Database, attempts: dict[str, int], every_s: float):
        super().__init__(daemon=True, name=f"heartbeat-{next(iter(attempts))}")
        self.database, self.attempts, self.every_s = database, attempts, every_s
        self.interrupter = Interrupter()
        self.phases: dict[str, str] = {}  # what each starting run does, set by the task's thread
        self.done = threading.Event()

    def run(self) -> None:
        held = or_(*(_held(i, a) for i, a in self.attempts.items()))
        beat_at = time.monotonic() + self.every_s
        shown: dict[str, str] = {}
        while not self.done.wait(min(CANCEL_POLL_S, self.every_s)):
            try:
                with self.database.session() as session:
                    for run_id, text in list(self.phases.items()):
                        if shown.get(run_id) != text:
                            session.execute(
                                update(Run)
                                .where(
                                    _held(run_id, self.attempts[run_id]), Run.status == RunStatus.preparing
                                )
                                .values(phase=text)
                            )
                            shown[run_id] = text
                    cancelled = set(session.scalars(select(Run.id).where(held, Run.cancel_requested)))
                    if time.monotonic() >= beat_at:
                        session.execute(update(Run).where(held).values(heartbeat_at=utcnow()))
                        beat_at = time.monotonic() + self.every_s
                if cancelled:
                    self.interrupter.interrupt(cancelled)
                    self._end_if_stuck()
            except Exception:  # a missed beat is harmless; the next one retries
                log.warning("%s: heartbeat failed", next(iter(self.attempts)), exc_info=True)

    def _end_if_stuck(self) -> None:
        """Records cancelled the runs of a section that a raised interrupt has not reached within
        STUCK_S (a call blocked in C) and ends this pool process, as a hard time limit would:
        the pool starts another, and the task's message, delivered again, finds the runs ended."""
        stuck = self.interrupter.stuck(STUCK_S)
        if not stuck:
            return
        for run_id in stuck:  # charged what its ledger holds, like any cancel inside a round
            _finish(self.database, run_id, self.attempts[run_id], status=RunStatus.cancelled)
        log.error(
            "%s: cancelled inside a call that did not return; ending this pool process", ", ".join(stuck)
        )
        os._exit(EXIT_STUCK)


def execute(database: Database, settings: Settings, run_id: str) -> None:
    """Runs a claimed run to its end and records the outcome on its row."""
    execute_many(database, settings, [run_id])


def execute_many(database: Database, settings: Settings, run_ids: list[str]) -> None:
    """Starts the claimed runs (of one batch), trains those that started together, and records
    each outcome on its own row; a run that cannot start fails alone."""
    attempts = _attempts(database, run_ids)
    # several beats per timeout, so that a beat or two delayed (a locked database) is not a death
    heartbeat = _Heartbeat(database, attempts, every_s=min(HEARTBEAT_S, settings.heartbeat_timeout_s / 4))
    heartbeat.start()
    try:
        started = {}
        for run_id in run_ids:
            with logs.running(run_id):
                only = {run_id: attempts[run_id]}
                outcome = _guarded(
                    database,
                    only,
                    lambda i=run_id, a=attempts[run_id]: _start(database, settings, i, a, heartbeat),
                )
            if outcome is not None:
                started[run_id] = outcome
        if not started:
            return
        ids = list(started)
        held = {i: attempts[i] for i in ids}
        with logs.running(ids[0]):
            _guarded(
                database,
                held,
                lambda: runner.train(
                    list(started.values()),
                    on_round=[_round_recorder(database, i, held[i]) for i in ids],
                    should_stop=[_stop_asked(database, i, held[i]) for i in ids],
                    # a cancelled run is recorded at once, while the rest of its batch goes on
                    on_end=lambda i, result: _record_result(database, ids[i], held[ids[i]], result),
                    section=lambda active: heartbeat.interrupter.section([ids[i] for i in active]),
                ),
            )
        for run_id in ids:
            _keep_views(database, run_id)
    finally:
        heartbeat.done.set()


def _protection(session: Session, settings: Settings, run_id: str) -> tuple[RunSpec, str | None, bool, bool]:
    """Returns the run's spec, the budget on the records it reads now (if any), whether it is
    protected, and whether its test split is public by the budget's declaration. A budget set
    while the run waited in the queue protects it too: its noise must be independent, and its ε
    is reserved once its start has planned it, before anything is released."""
    row = session.get(Run, run_id)
    spec = parse_spec(row.spec)
    check_dataset_files(spec, settings)  # admission checked it; a row may predate that check
    budget = budgets.covering(session, spec, settings)
    if budget is not None and session.get(BudgetCharge, run_id) is None:
        if spec.privacy is None:
            raise Conflict(
                f"{_waited(budget)}; only private runs may use it, and {spec.algorithm} is not private"
            )
        row.protected = True
    public_test = budget is not None and session.get(Budget, budget).public_test
    return spec, budget, row.protected, public_test


def _waited(budget: str) -> str:
    return f"dataset {budget!r} gained a privacy budget while this run waited"


def _secure(session: Session, run_id: str, budget: str, started: runner.Started) -> None:
    """Refuses a start whose ledger would not cover everything it releases, and reserves, or raises,
    the run's charge to the ε its own draws plan (`budgets.secure`)."""
    run, queued = session.get(Run, run_id), session.get(BudgetCharge, run_id) is None
    planned = started.privacy.planned_epsilon
    try:
        uncovered = runner.uncovered(started.privacy, started.spec.dataset)
        budgets.check_bounded(session, budget=budget, spec=started.spec, uncovered=uncovered)
        budgets.secure(session, run=run, budget=budget, epsilon=planned[-1] if planned else 0.0)
    except Conflict as exc:
        raise type(exc)(f"{_waited(budget)}: {exc.message}" if queued else exc.message) from None


def _start(
    database: Database, settings: Settings, run_id: str, attempt: int, heartbeat: _Heartbeat
) -> runner.Started:
    spec, budget, protected, public_test = _written(
        database, run_id, lambda session: _protection(session, settings, run_id)
    )

    def phase(text: str) -> None:  # written by the heartbeat thread: no database work in a section
        heartbeat.phases[run_id] = text

    with heartbeat.interrupter.section([run_id]):
        started = runner.start(
            spec,
            data_dirs=settings.data_dirs,
            cache_dir=settings.cache_dir,
            protected=protected,
            public_test=public_test,
            on_phase=phase,
            device=settings.device,
        )
    heartbeat.phases.pop(run_id, None)
    if budget is not None:  # before any release: the charge covers what these draws plan
        _written(database, run_id, lambda session: _secure(session, run_id, budget, started))
    _written(
        database,
        run_id,
        lambda s: s.execute(
            update(Run).where(_held(run_id, attempt)).values(status=RunStatus.running, phase=None)
        ),
    )
    return started


def _guarded(database: Database, attempts: dict[str, int], body: Callable[[], T]) -> T | None:
    """Returns what `body` returns; on an error, fails the runs (with its message if it is the
    user's, a pointer to the log if it is ours) and returns None."""
    try:
        return body()
    except RunCancelled:  # in the middle of a start or a round: charged what its ledger holds
        for run_id, attempt in attempts.items():
            _finish(database, run_id, attempt, status=RunStatus.cancelled)
    except Conflict as exc:  # refused at its start by a budget set while it waited
        for run_id, attempt in attempts.items():
            _finish(database, run_id, attempt, status=RunStatus.failed, error=exc.message)
    except DpflError as exc:
        for run_id, attempt in attempts.items():
            _finish(database, run_id, attempt, status=RunStatus.failed, error=str(exc))
    except Exception:
        log.exception("%s: internal error", ", ".join(attempts))
        for run_id, attempt in attempts.items():
            _finish(
                database,
                run_id,
                attempt,
                status=RunStatus.failed,
                error=f"internal error in worker (run {run_id}); see worker log",
            )
    return None


def _round_recorder(database: Database, run_id: str, attempt: int) -> Callable[[runner.Progress], None]:
    """Returns the `on_round` that writes a run's round: its metrics, ledger rows and progress."""

    def record_round(session: Session, p: runner.Progress) -> None:
        if not _hold(session, run_id, attempt):
            return  # re-queued meanwhile: `should_stop` ends it before the next round
        if p.record is not None:
            _upsert(session, RoundMetric, _metric_rows(run_id, [p.record]), ["run_id", "round"])
        _upsert(
            session,
            LedgerEventRow,
            [
                {
                    "run_id": run_id,
                    "round": p.round,
                    "party": party,
                    "events": [to_json(public_event(e)) for e in events],
                    "withheld": _withheld(events),
                }
                for party, events in p.releases.items()
            ],
            ["run_id", "round", "party"],
        )
        values: dict[str, Any] = {
            "current_round": p.round,
            "progress": p.round / p.rounds,
            "heartbeat_at": utcnow(),
            "epsilon": p.epsilon,
        }
        if p.record is not None:
            values |= {"final_accuracy": p.record.accuracy, "final_loss": p.record.loss}
        session.execute(update(Run).where(Run.id == run_id).values(**values))

    return lambda p: _written(database, run_id, lambda session: record_round(session, p))


def _stop_asked(database: Database, run_id: str, attempt: int) -> Callable[[], bool]:
    """Returns the `should_stop` that reads the run's cancel flag, and stops an attempt that no
    longer holds its run."""

    def asked() -> bool:
        with database.session() as session:
            held = session.scalar(select(Run.cancel_requested).where(_held(run_id, attempt)))
        return held is None or bool(held)

    return asked


def _withheld(events: list) -> list | None:
    """Returns each event's withheld fields (None where it has none), or None when no event has any."""
    fields = [withheld_fields(e) for e in events]
    return fields if any(f is not None for f in fields) else None


def _record_result(database: Database, run_id: str, attempt: int, result: runner.RunResult) -> None:
    final = result.final

    def rows(session: Session) -> None:
        if _hold(session, run_id, attempt):
            _upsert(session, RoundMetric, _metric_rows(run_id, result.rounds), ["run_id", "round"])

    _written(database, run_id, rows)
    _finish(
        database,
        run_id,
        attempt,
        status=RunStatus.cancelled if result.stopped else RunStatus.succeeded,
        epsilon=result.epsilon,
        final_accuracy=None if final is None else final.accuracy,
        final_loss=None if final is None else final.loss,
        noise_multiplier=result.privacy.noise_multiplier,
        diagnostics=result.diagnostics(),
        protected=result.protected,
        warning=result.privacy.warning(result.epsilon),
        caveats=[c.to_json() for c in result.privacy.caveats],
        timings=result.timings,
    )


def _keep_views(database: Database, run_id: str) -> None:
    """Computes and keeps a finished run's page views (its ledger and its figures, by its own
    accountant at its own δ) while this process still remembers its ε curves, so its page's first
    visit reads them (`backend.runs.settled`): a `pld` run's would otherwise cost that visit
    seconds (issue 43). After the batch, so no run of it waits; a view that fails here is computed
    on request, as before, and says why there."""
    from backend.figures.service import run_figures  # plotly's figures: only once a run has ended

    try:
        with database.session() as session:
            run = session.get(Run, run_id)
            if run is None or not RunStatus(run.status).finished:  # deleted, or re-queued
                return
            ledger(session, run_id, accountant=None, delta=None)
            run_figures(session, run_id, accountant=None)
    except Exception:  # nothing of the run depends on it
        log.warning("%s: its page's views were not kept; they are computed on request", run_id, exc_info=True)


def _finish(database: Database, run_id: str, attempt: int, *, status: RunStatus, **values: Any) -> None:
    _written(
        database, run_id, lambda session: _record_finish(session, run_id, attempt, status=status, **values)
    )


def _record_finish(session: Session, run_id: str, attempt: int, *, status: RunStatus, **values: Any) -> None:
    if not _hold(session, run_id, attempt):
        # it ended earlier in its batch (cancelled) before the batch failed, or it was re-queued
        return
    run = session.get(Run, run_id)
    if "epsilon" in values:
        spent = values["epsilon"]
    else:  # failed, or interrupted: what its ledger holds (a re-queued attempt's releases included)
        spent = released_epsilon(session, run)
        if status == RunStatus.cancelled:
            values["epsilon"] = spent
    for key, value in values.items():
        setattr(run, key, value)
    run.status = status
    run.phase = None
    run.finished_at = utcnow()
    run.progress = 1.0 if status == RunStatus.succeeded else run.progress
    budgets.settle(session, run_id=run_id, spent=spent or 0.0)

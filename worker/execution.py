"""One run's life in a worker: claim it, run it through `dpfl.runner.run`, record every round.

Metrics and ledger rows are upserted on (run, round[, party]), so a run that is re-queued
after its worker died and runs again writes nothing twice. A heartbeat thread keeps the
row's `heartbeat_at` fresh; the API re-queues runs whose heartbeat stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from backend import budgets
from backend.datasets.service import check_dataset_files
from backend.db import Database, is_locked, utcnow
from backend.models import LedgerEventRow, RoundMetric, Run, RunStatus
from backend.runs.service import ATTEMPT_RESET
from backend.runs.service import ledger as ledger_of
from backend.settings import Settings
from dpfl import runner
from dpfl.errors import DpflError
from dpfl.privacy.events import public_event, to_json, withheld_fields
from dpfl.spec import parse_spec
from worker import logs

__all__ = ["claim", "execute"]

log = logging.getLogger(__name__)
HEARTBEAT_S = 5.0
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


def _claim(session: Session, run_id: str, *, worker: str) -> bool:
    now = utcnow()
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status == RunStatus.queued)
        .values(
            status=RunStatus.running,
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
            "loss": r.loss,
            "epsilon": r.epsilon,
            "metrics": r.metrics,
            "diagnostics": r.diagnostics or None,
        }
        for r in records
    ]


class _Heartbeat(threading.Thread):
    def __init__(self, database: Database, run_id: str):
        super().__init__(daemon=True, name=f"heartbeat-{run_id}")
        self.database, self.run_id, self.done = database, run_id, threading.Event()

    def run(self) -> None:
        while not self.done.wait(HEARTBEAT_S):
            try:
                with self.database.session() as session:
                    session.execute(update(Run).where(Run.id == self.run_id).values(heartbeat_at=utcnow()))
            except Exception:  # a missed beat is harmless; the next one retries
                log.warning("%s: heartbeat failed", self.run_id, exc_info=True)


def execute(database: Database, settings: Settings, run_id: str) -> None:
    """Runs a claimed run to its end and records the outcome on its row."""
    with database.session() as session:
        row = session.get(Run, run_id)
        spec = parse_spec(row.spec)
        # A budget added after admission protects the run too: its noise must be independent.
        protected = row.protected or budgets.exists(session, row.dataset)

    def on_round(p: runner.Progress) -> None:
        _written(database, run_id, lambda session: record_round(session, p))

    def record_round(session: Session, p: runner.Progress) -> None:
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

    def should_stop() -> bool:
        with database.session() as session:
            return bool(session.scalar(select(Run.cancel_requested).where(Run.id == run_id)))

    heartbeat = _Heartbeat(database, run_id)
    heartbeat.start()
    try:
        check_dataset_files(spec, settings)  # admission checked it; a row may predate that check
        with logs.running(run_id):
            result = runner.run(
                spec,
                data_dirs=settings.data_dirs,
                cache_dir=settings.cache_dir,
                on_round=on_round,
                should_stop=should_stop,
                protected=protected,
            )
    except DpflError as exc:
        _finish(database, run_id, status=RunStatus.failed, error=str(exc))
        return
    except Exception:
        log.exception("%s: internal error", run_id)
        _finish(
            database,
            run_id,
            status=RunStatus.failed,
            error=f"internal error in worker (run {run_id}); see worker log",
        )
        return
    finally:
        heartbeat.done.set()
    _record_result(database, run_id, result)


def _withheld(events: list) -> list | None:
    """Returns each event's withheld fields (None where it has none), or None when no event has any."""
    fields = [withheld_fields(e) for e in events]
    return fields if any(f is not None for f in fields) else None


def _record_result(database: Database, run_id: str, result: runner.RunResult) -> None:
    final = result.final
    _written(
        database,
        run_id,
        lambda session: _upsert(
            session, RoundMetric, _metric_rows(run_id, result.rounds), ["run_id", "round"]
        ),
    )
    _finish(
        database,
        run_id,
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


def _finish(database: Database, run_id: str, *, status: RunStatus, **values: Any) -> None:
    _written(database, run_id, lambda session: _record_finish(session, run_id, status=status, **values))


def _record_finish(session: Session, run_id: str, *, status: RunStatus, **values: Any) -> None:
    run = session.get(Run, run_id)
    spent = values.get("epsilon", run.epsilon) if status != RunStatus.failed else _spent_so_far(session, run)
    for key, value in values.items():
        setattr(run, key, value)
    run.status = status
    run.finished_at = utcnow()
    run.progress = 1.0 if status == RunStatus.succeeded else run.progress
    budgets.settle(session, run_id=run_id, spent=spent or 0.0)


def _spent_so_far(session: Session, run: Run) -> float:
    """Returns the ε of what a failed run released before it failed (its ledger, recomputed)."""
    return ledger_of(session, run.id, accountant=None, delta=None)["epsilon"] or 0.0

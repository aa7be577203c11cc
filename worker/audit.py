"""One audit's life in a worker: claim it, run `dpfl.audit.rounds.audit_first_round` (and the
black-box trials, `audit_black_box`) on the run's stored spec, record the result or the error on
the audit row."""

from __future__ import annotations

import logging

from sqlalchemy import update

from backend.db import Database, utcnow
from backend.models import Audit, AuditStatus, Run
from backend.settings import Settings
from dpfl.audit.rounds import audit_black_box, audit_first_round, audit_json
from dpfl.errors import DpflError
from dpfl.spec import parse_spec

__all__ = ["claim", "execute"]

log = logging.getLogger(__name__)


def claim(database: Database, audit_id: str, *, worker: str) -> bool:
    """Moves the audit queued → running in one UPDATE; False if another delivery got it first."""
    with database.session() as session:
        result = session.execute(
            update(Audit)
            .where(Audit.id == audit_id, Audit.status == AuditStatus.queued)
            .values(status=AuditStatus.running, worker=worker, started_at=utcnow(), error=None)
        )
        return result.rowcount == 1


def execute(database: Database, settings: Settings, audit_id: str) -> None:
    """Audits a claimed audit's run and records the outcome on the audit row."""
    with database.session() as session:
        audit = session.get(Audit, audit_id)
        trials, seeds, black_box_trials = audit.trials, audit.seeds, audit.black_box_trials
        spec = parse_spec(session.get(Run, audit.run_id).spec)
    try:
        releases = audit_first_round(spec, data_dirs=settings.data_dirs, trials=trials, seeds=seeds)
        black = None
        if black_box_trials:
            black = audit_black_box(spec, data_dirs=settings.data_dirs, trials=black_box_trials, seeds=seeds)
    except DpflError as exc:
        _finish(database, audit_id, status=AuditStatus.failed, error=str(exc))
        return
    except Exception:
        log.exception("%s: internal error in audit", audit_id)
        _finish(
            database,
            audit_id,
            status=AuditStatus.failed,
            error=f"internal error in worker (audit {audit_id}); see worker log",
        )
        return
    _finish(database, audit_id, status=AuditStatus.succeeded, result=audit_json(releases, black))


def _finish(database: Database, audit_id: str, *, status: AuditStatus, **values) -> None:
    with database.session() as session:
        session.execute(
            update(Audit).where(Audit.id == audit_id).values(status=status, finished_at=utcnow(), **values)
        )

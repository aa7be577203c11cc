"""Sending queued runs' and audits' messages, so that every admitted run (and audit) is run.

A run row is committed before its message is sent (a worker must find the row), so the two
can come apart: the API dies between them, the broker is down, or the broker loses the message
(a Redis killed before it saved). The row is the source of truth: `dispatched_at` says when its
message was last sent, and `dispatch` (a loop in the API) sends again the message of every run
still queued whose message is older than `dispatch_timeout_s` (or was never sent) and that the
broker does not hold. A duplicate message is harmless: a worker's claim takes a run once.
Audits are sent the same way (`dispatch_audits`), by their age, as they are sent once.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from celery import Celery
from sqlalchemy import or_, select, update

from backend.db import Database, utcnow
from backend.models import Audit, AuditStatus, Run, RunStatus
from backend.queue import enqueue_audit, enqueue_run, enqueue_runs, pending_runs
from backend.settings import Settings

__all__ = ["dispatch", "dispatch_audits", "send", "send_audit"]

log = logging.getLogger(__name__)


def send(database: Database, celery: Celery, run_ids: Sequence[str]) -> bool:
    """Sends the runs' messages, one per batch for runs of a batch, and records when; returns
    False (and logs) if the broker refused.

    A run whose message could not be sent stays queued, and `dispatch` sends it later.
    """
    if not run_ids:
        return True
    with database.session() as session:
        batch_of = dict(session.execute(select(Run.id, Run.batch_id).where(Run.id.in_(run_ids))).all())
    alone = [i for i in run_ids if batch_of.get(i) is None]
    batch_ids = list(dict.fromkeys(batch_of[i] for i in run_ids if batch_of.get(i) is not None))
    try:
        if len(alone) == 1 and not batch_ids:
            enqueue_run(celery, alone[0])
        else:
            enqueue_runs(celery, alone, batch_ids)
    except Exception as exc:  # the broker is down: the dispatcher sends the runs when it is back
        log.warning("broker unreachable, %d run(s) stay queued until it is back: %s", len(run_ids), exc)
        return False
    with database.session() as session:
        session.execute(
            update(Run)
            .where(Run.id.in_(run_ids), Run.status == RunStatus.queued)
            # bookkeeping, not a change of the run that clients are told of
            .values(dispatched_at=utcnow(), updated_at=Run.updated_at)
        )
    return True


def dispatch(database: Database, celery: Celery, settings: Settings) -> list[str]:
    """Sends again the messages of queued runs whose message is lost; returns their ids."""
    cutoff = utcnow() - dt.timedelta(seconds=settings.dispatch_timeout_s)
    with database.session() as session:
        candidates = session.execute(
            select(Run.id, Run.batch_id)
            .where(
                Run.status == RunStatus.queued,
                or_(
                    Run.dispatched_at < cutoff,
                    # never sent: the request that admitted it had time to, and did not
                    Run.dispatched_at.is_(None) & (Run.updated_at < cutoff),
                ),
            )
            .order_by(Run.created_at, Run.id)
        ).all()
        candidates = [tuple(row) for row in candidates]
    lost = _lost(celery, settings, candidates, what="run(s)")
    if lost is None:
        return []
    held = [run_id for run_id, _ in candidates if run_id not in lost]
    if held:  # still waiting in the broker (a long backlog): look again a timeout later
        with database.session() as session:
            session.execute(
                update(Run)
                .where(Run.id.in_(held), Run.status == RunStatus.queued)
                .values(dispatched_at=utcnow(), updated_at=Run.updated_at)
            )
    if lost and send(database, celery, lost):
        log.warning("%d queued run(s) had no message in the broker; sent again", len(lost))
        return lost
    return []


def send_audit(celery: Celery, audit_id: str) -> bool:
    """Sends an audit's message; returns False (and logs) if the broker refused: the audit stays
    queued and `dispatch_audits` sends it when the broker is back."""
    try:
        enqueue_audit(celery, audit_id)
    except Exception as exc:
        log.warning("broker unreachable, audit %s stays queued until it is back: %s", audit_id, exc)
        return False
    return True


def dispatch_audits(database: Database, celery: Celery, settings: Settings) -> list[str]:
    """Sends again the messages of audits queued for longer than `dispatch_timeout_s` that the
    broker does not hold; returns their ids."""
    cutoff = utcnow() - dt.timedelta(seconds=settings.dispatch_timeout_s)
    with database.session() as session:
        queued = list(
            session.scalars(
                select(Audit.id).where(Audit.status == AuditStatus.queued, Audit.created_at < cutoff)
            )
        )
    lost = _lost(celery, settings, [(i,) for i in queued], what="audit(s)") or []
    sent = [i for i in lost if send_audit(celery, i)]
    if sent:
        log.warning("%d queued audit(s) had no message in the broker; sent again", len(sent))
    return sent


def _lost(celery: Celery, settings: Settings, candidates: list[tuple], *, what: str) -> list[str] | None:
    """Returns the first id of each candidate whose message the broker holds under none of its ids
    (a run's message may be its batch's); None while the broker is down (logged: nothing can be
    sent then anyway)."""
    if not candidates:
        return []
    try:
        pending = pending_runs(celery, settings)
    except Exception as exc:
        log.warning("broker unreachable, %d queued %s wait for it: %s", len(candidates), what, exc)
        return None
    return [
        ids[0] for ids in candidates if pending is None or not any(i in pending for i in ids if i is not None)
    ]

"""Rules and queries for audits. Services flush; the request or task that called them commits."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend import budgets
from backend.db import utcnow
from backend.errors import Conflict, TooManyRequests
from backend.models import Audit, AuditStatus, RunSource, WorkerBeat
from backend.runs.service import get_run
from backend.settings import Settings
from dpfl.audit.rounds import check_auditable
from dpfl.errors import SpecError
from dpfl.spec import parse_spec

__all__ = ["OPEN", "create_audit", "fail_lost", "latest_audit"]

OPEN = (AuditStatus.queued, AuditStatus.running)


def create_audit(
    session: Session,
    *,
    run_id: str,
    trials: int,
    settings: Settings,
    seeds: int = 1,
    black_box_trials: int = 0,
) -> Audit:
    """Returns a queued audit of the run's first rounds; refuses what cannot or must not be audited (409).

    Raises:
        NotFound: no run with this id.
        Conflict: the run is external or not private, its algorithm has no audit coverage, its
            dataset has a budget (the audit releases round 1 many times on the private data, unaccounted),
            or it is being audited already.
        TooManyRequests: `max_open_audits` audits are queued or running (429): each can take a
            worker for long and gigabytes of memory, so they do not pile up.
    """
    run = get_run(session, run_id)
    if run.source == RunSource.external:
        raise Conflict(
            f"run {run_id!r} was executed outside this server (ledger as reported): without its code "
            "and data there is nothing to audit"
        )
    if run.notion == "none":
        raise Conflict(
            f"run {run_id!r} is not private ({run.algorithm} releases without noise); "
            "there is nothing to audit"
        )
    try:
        check_auditable(run.algorithm)
    except SpecError as exc:
        raise Conflict(f"run {run_id!r} cannot be audited: {exc.reason}") from None
    if run.protected or budgets.covering(session, parse_spec(run.spec), settings) is not None:
        raise Conflict(
            f"run {run_id!r} is protected: an audit releases round 1 {trials:,} times on the private "
            f"data without accounting, so datasets with a budget ({run.dataset!r}) are not audited; "
            "audit the same spec on public data"
        )
    mine = session.scalars(
        select(Audit).where(Audit.run_id == run.id, Audit.status.in_(OPEN)).limit(1)
    ).first()
    if mine is not None:
        raise Conflict(
            f"run {run_id!r} is being audited already (audit {mine.id}, {mine.status}); wait for it"
        )
    open_ = session.scalar(select(func.count()).select_from(Audit).where(Audit.status.in_(OPEN)))
    if open_ >= settings.max_open_audits:
        raise TooManyRequests(
            f"{open_} audits are queued or running, the most this server takes at once "
            "(DPFL_MAX_OPEN_AUDITS); send it again once one has finished"
        )
    audit = Audit(
        run_id=run.id,
        trials=trials,
        seeds=seeds,
        black_box_trials=black_box_trials,
        status=AuditStatus.queued,
    )
    session.add(audit)
    session.flush()
    return audit


def latest_audit(session: Session, *, run_id: str) -> Audit | None:
    """Returns the run's most recent audit, or None when it has not been audited; raises NotFound
    (404) for an unknown run."""
    get_run(session, run_id)
    return session.scalars(
        select(Audit).where(Audit.run_id == run_id).order_by(Audit.created_at.desc(), Audit.id).limit(1)
    ).first()


def fail_lost(session: Session, *, settings: Settings) -> list[str]:
    """Fails the running audits whose worker stopped beating (killed, out of memory): an audit is
    not re-run on its own, and a row left `running` would be waited on for good. Returns their ids."""
    cutoff = utcnow() - dt.timedelta(seconds=settings.heartbeat_timeout_s)
    live = select(WorkerBeat.name).where(WorkerBeat.heartbeat_at >= cutoff)
    lost = session.scalars(
        select(Audit).where(Audit.status == AuditStatus.running, Audit.worker.not_in(live))
    ).all()
    for audit in lost:
        audit.status = AuditStatus.failed
        audit.finished_at = utcnow()
        audit.error = (
            f"worker lost: {audit.worker} stopped while auditing (killed, or out of memory); "
            "POST the audit again to retry"
        )
    session.flush()
    return [a.id for a in lost]

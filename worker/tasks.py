"""Tasks: stable names, an id as the only argument; the body claims, delegates, records."""

from __future__ import annotations

import functools

from backend.db import Database
from backend.queue import AUDIT_RUN, EXECUTE_BATCH, EXECUTE_RUN
from backend.settings import get_settings
from worker import audit, execution
from worker.app import app


@functools.lru_cache
def _database() -> Database:
    settings = get_settings()
    return Database(settings.database_url, sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s)


@app.task(name=EXECUTE_RUN)
def execute_run(run_id: str) -> None:
    """Runs one queued run; a redelivered message finds it claimed and does nothing."""
    database = _database()
    if not execution.claim(database, run_id, worker=execute_run.request.hostname or "worker"):
        return
    execution.execute(database, get_settings(), run_id)


@app.task(name=EXECUTE_BATCH)
def execute_batch(batch_id: str) -> None:
    """Runs a batch's queued runs together; those another delivery claimed are left to it."""
    database = _database()
    claimed = execution.claim_batch(database, batch_id, worker=execute_batch.request.hostname or "worker")
    if claimed:
        execution.execute_many(database, get_settings(), claimed)


@app.task(name=AUDIT_RUN)
def audit_run(audit_id: str) -> None:
    """Audits one queued audit's run (its first round); a redelivered message does nothing."""
    database = _database()
    if not audit.claim(database, audit_id, worker=audit_run.request.hostname or "worker"):
        return
    audit.execute(database, get_settings(), audit_id)

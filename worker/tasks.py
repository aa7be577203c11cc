"""Tasks: stable names, the run id as the only argument; the body claims, delegates, records."""

from __future__ import annotations

import functools

from backend.db import Database
from backend.queue import EXECUTE_RUN
from backend.settings import get_settings
from worker import execution
from worker.app import app


@functools.lru_cache
def _database() -> Database:
    return Database(get_settings().database_url)


@app.task(name=EXECUTE_RUN)
def execute_run(run_id: str) -> None:
    """Runs one queued run; a redelivered message finds it claimed and does nothing."""
    database = _database()
    if not execution.claim(database, run_id, worker=execute_run.request.hostname or "worker"):
        return
    execution.execute(database, get_settings(), run_id)

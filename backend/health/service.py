"""Health checks: SELECT 1 on the database, a connection to the broker (for the embedded one, a
file written in its message folder), and live workers.

Workers are seen three ways, on every broker: each worker process beats on its own row in
`workers` while it is up (worker/presence.py), idle or busy; and on the row of the run it holds,
so a heartbeat within `heartbeat_timeout_s` on either names a live worker. Where the broker
supports Celery's remote control (Redis, not the embedded filesystem transport), workers also
answer a ping.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from celery import Celery
from sqlalchemy import select, text

from backend.db import Database
from backend.health.schemas import HealthRead
from backend.models import Run, WorkerBeat
from backend.settings import Settings

__all__ = ["health"]

log = logging.getLogger(__name__)

PING_TIMEOUT_S = 1.0
BROKER_TIMEOUT_S = 2.0


def health(database: Database, celery: Celery, *, settings: Settings) -> HealthRead:
    """Returns the database's and the broker's status ("ok" or the error met), the workers seen, and
    the version."""
    database_status = _status(_select_one, database)
    broker_status = _status(_connect, celery)
    if broker_status == "ok" and settings.embedded:  # its messages are files: it must write them
        broker_status = _status(_writable, settings.broker_folder / "queue")
    workers: set[str] = set()
    if database_status == "ok":
        workers |= _seen(_heartbeats, database, settings)
    if broker_status == "ok" and not settings.embedded:  # the filesystem transport has no remote control
        workers |= _seen(_ping, celery)
    return HealthRead(
        database=database_status,
        broker=broker_status,
        workers=sorted(workers),
        version=_version(),
    )


def _status(probe: Callable[..., None], *args: Any) -> str:
    """Returns "ok" when the probe succeeds, else the first line of its error."""
    try:
        probe(*args)
    except Exception as exc:  # a health check reports any failure, it never raises
        log.warning("health check %s failed: %s", probe.__name__, exc)
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return "ok"


def _seen(probe: Callable[..., set[str]], *args: Any) -> set[str]:
    """Returns the workers the probe names, or none when it fails."""
    try:
        return probe(*args)
    except Exception as exc:  # one way of seeing workers failing must not hide the other
        log.warning("health check %s failed: %s", probe.__name__, exc)
        return set()


def _select_one(database: Database) -> None:
    with database.engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def _connect(celery: Celery) -> None:
    with celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_S)


def _writable(folder: Path) -> None:
    """Raises the OSError a write in `folder` meets (a full or read-only disk, a missing folder)."""
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".health-") as probe:
        probe.write(b"ok")
        probe.flush()


def _heartbeats(database: Database, settings: Settings) -> set[str]:
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=settings.heartbeat_timeout_s)
    with database.session() as session:
        names = set(
            session.scalars(
                select(Run.worker).where(Run.heartbeat_at >= cutoff, Run.worker.is_not(None)).distinct()
            )
        )
        return names | set(session.scalars(select(WorkerBeat.name).where(WorkerBeat.heartbeat_at >= cutoff)))


def _ping(celery: Celery) -> set[str]:
    return set(celery.control.inspect(timeout=PING_TIMEOUT_S).ping() or {})


def _version() -> str:
    try:
        return metadata.version("dpfl-explorer")
    except metadata.PackageNotFoundError:
        return "unknown"

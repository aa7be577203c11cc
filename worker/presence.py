"""A worker process's own heartbeat: its row in `workers`, refreshed while it is up, deleted
when it stops. Health lists the workers that beat lately, idle or busy, on every broker."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from backend.db import Database, utcnow
from backend.models import WorkerBeat

__all__ = ["Presence"]

log = logging.getLogger(__name__)
BEAT_S = 5.0


class Presence(threading.Thread):
    """Beats on the worker's row every BEAT_S until `stop()`, which deletes the row."""

    def __init__(self, database: Database, name: str):
        super().__init__(daemon=True, name="worker-presence")
        self.database, self.worker, self.done = database, name, threading.Event()

    def beat(self) -> None:
        """Upserts the worker's row with the time now."""
        now = utcnow()
        insert = pg_insert if self.database.engine.dialect.name == "postgresql" else sqlite_insert
        stmt = insert(WorkerBeat).values(name=self.worker, started_at=now, heartbeat_at=now)
        with self.database.session() as session:
            session.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={"heartbeat_at": now}))

    def run(self) -> None:
        while True:
            try:
                self.beat()
            except Exception:  # a missed beat is harmless; the next one retries
                log.warning("worker heartbeat failed", exc_info=True)
            if self.done.wait(BEAT_S):
                return

    def stop(self) -> None:
        """Stops beating and deletes the row: a worker that stopped is not listed."""
        self.done.set()
        try:
            with self.database.session() as session:
                session.execute(delete(WorkerBeat).where(WorkerBeat.name == self.worker))
        except Exception:  # its beat goes stale within the heartbeat timeout anyway
            log.warning("could not remove the worker's heartbeat row", exc_info=True)

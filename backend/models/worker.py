"""workers: one row per worker process, beating while it is up, so health can list idle workers
on every broker (the filesystem transport has no remote control to ping them)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, UtcDateTime, utcnow

__all__ = ["WorkerBeat"]


class WorkerBeat(Base):
    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)  # Celery's hostname, as runs.worker
    started_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)
    heartbeat_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)

"""audits: one row per requested audit of a run's first rounds, the source of truth for its outcome."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, UtcDateTime, utcnow

__all__ = ["Audit", "AuditStatus"]


class AuditStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"


class Audit(Base):
    __tablename__ = "audits"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=lambda: uuid.uuid4().hex[:16])
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    status: Mapped[str] = mapped_column(String(16), default=AuditStatus.queued)
    trials: Mapped[int] = mapped_column(Integer)
    seeds: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # runs per side of the black-box trials; 0: none
    black_box_trials: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # {"releases": [ReleaseAudit.to_json(), ...], "black_box": BlackBoxAudit.to_json()} once succeeded
    result: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)

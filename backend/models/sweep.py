"""sweeps: a base spec and a grid; its runs point back to it."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, Text, false, text
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, UtcDateTime, utcnow

__all__ = ["Sweep"]


class Sweep(Base):
    __tablename__ = "sweeps"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=lambda: uuid.uuid4().hex[:16])
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    base: Mapped[dict[str, Any]] = mapped_column(JSON)
    grid: Mapped[dict[str, Any]] = mapped_column(JSON)
    num_runs: Mapped[int] = mapped_column(Integer)
    # What its user makes of it (PATCH /api/sweeps/{id}); archived sweeps leave the list.
    tags: Mapped[list[str]] = mapped_column(JSON, default=list, server_default=text("'[]'"))
    notes: Mapped[str] = mapped_column(Text, default="", server_default="")
    archived: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)

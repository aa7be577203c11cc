"""settled_views: what a finished run's pages computed (its ledger's ε curves, its figures), kept
per (run, view, accountant, δ) and the code that computed it (backend/runs/settled.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, UtcDateTime, utcnow

__all__ = ["SettledView"]


class SettledView(Base):
    __tablename__ = "settled_views"
    __table_args__ = (UniqueConstraint("run_id", "view", "accountant", "delta"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("runs.id", ondelete="CASCADE"))
    view: Mapped[str] = mapped_column(String(16))  # "ledger" or "figures"
    accountant: Mapped[str] = mapped_column(String(32))  # as asked; "" for the run's headline accountant
    delta: Mapped[float] = mapped_column(Float)  # the δ the ε curves are at (the run's own when not asked)
    # digest of the code and packages the body came from: a changed accountant or figure is recomputed
    code: Mapped[str] = mapped_column(String(16))
    body: Mapped[Any] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow)

"""ledger_events: what each party released in each round (dpfl event JSON), unique per (run, round, party)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base

__all__ = ["LedgerEventRow"]


class LedgerEventRow(Base):
    __tablename__ = "ledger_events"
    __table_args__ = (UniqueConstraint("run_id", "round", "party"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    party: Mapped[str] = mapped_column(String(64))
    events: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # every release of that party in that round
    # Per event, its withheld fields (a vote's noiseless histogram) or None: read only by the
    # data-dependent accountant, never served (dpfl.privacy.events.public_event).
    withheld: Mapped[list[dict[str, Any] | None] | None] = mapped_column(JSON, nullable=True)

"""ledger_events: what each party released in each round (dpfl event JSON), unique per (run, round, party)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from backend.db import Base
from dpfl.privacy.events import with_withheld
from dpfl.privacy.ledger import Ledger

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

    @staticmethod
    def ledger(rows: Iterable[LedgerEventRow]) -> Ledger:
        """Returns the dpfl ledger of these rows, withheld fields restored (for the accountants only)."""
        return Ledger.from_json(
            {"round": r.round, "party": r.party, "event": with_withheld(e, w)}
            for r in rows
            for e, w in zip(r.events, r.withheld or [None] * len(r.events), strict=True)
        )

    @classmethod
    def run_ledger(cls, session: Session, run_id: str) -> Ledger:
        """Returns the run's whole ledger as the accountants read it (`ledger`)."""
        return cls.ledger(session.scalars(select(cls).where(cls.run_id == run_id)))

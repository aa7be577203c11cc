"""budgets and budget_charges: a dataset's total ε, in one unit, and what each run reserved and spent
of it."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, Boolean, Float, ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base, UtcDateTime, utcnow

__all__ = ["Budget", "BudgetCharge"]


class Budget(Base):
    """A total ε on some records, in one unit: ε at `delta`, per one `notion` unit under the
    `neighbouring` relation (set by the budget, or by the first run charged to it)."""

    __tablename__ = "budgets"

    dataset: Mapped[str] = mapped_column(String(64), primary_key=True)
    total_epsilon: Mapped[float] = mapped_column(Float)
    # the content digests of the records it covers (`dpfl.data.identity`); None on a budget set
    # before digests were kept, filled in from its name on first use
    digests: Mapped[list[str] | None] = mapped_column(JSON)
    delta: Mapped[float] = mapped_column(Float, default=1e-5, server_default="1e-05")
    notion: Mapped[str | None] = mapped_column(String(16))
    neighbouring: Mapped[str | None] = mapped_column(String(16))
    # the data's owner declares its test split public: metrics on it (and a voting pool carved
    # from it) are served, uncharged; otherwise a protected run's test metrics are withheld
    public_test: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class BudgetCharge(Base):
    """One run's charge: `reserved` at admission (its projected ε), `spent` once settled."""

    __tablename__ = "budget_charges"

    run_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    dataset: Mapped[str] = mapped_column(
        String(64), ForeignKey("budgets.dataset", ondelete="CASCADE"), index=True
    )
    reserved: Mapped[float] = mapped_column(Float)
    spent: Mapped[float | None] = mapped_column(Float)
    settled_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)

"""round_metrics: one row per evaluated round of a run, unique per (run, round)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from backend.db import Base

__all__ = ["RoundMetric"]


class RoundMetric(Base):
    __tablename__ = "round_metrics"
    __table_args__ = (UniqueConstraint("run_id", "round"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    # None where withheld: a protected run whose test split is not public by declaration
    accuracy: Mapped[float | None] = mapped_column(Float)
    # mean per-class recall (`dpfl.metrics.balanced_accuracy`); None where withheld or not recorded
    balanced_accuracy: Mapped[float | None] = mapped_column(Float)
    loss: Mapped[float | None] = mapped_column(Float)
    epsilon: Mapped[float | None] = mapped_column(Float)
    metrics: Mapped[Any] = mapped_column(JSON, nullable=True)  # private: the algorithm's private_metrics
    # not private (train_loss, clip fraction, ...): computed on private data without noise; None when withheld
    diagnostics: Mapped[Any] = mapped_column(JSON, nullable=True)

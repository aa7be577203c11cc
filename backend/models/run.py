"""runs: one row per submitted run, the source of truth for its status and outcome."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, false, func, select, text
from sqlalchemy.orm import Mapped, column_property, mapped_column

from backend.db import Base, UtcDateTime, utcnow
from backend.models.round_metric import RoundMetric
from backend.models.sweep import Sweep

__all__ = ["CLAIMED", "LIVE", "Run", "RunSource", "RunStatus"]


class RunSource(enum.StrEnum):
    native = "native"  # run by our workers from its spec
    external = "external"  # executed elsewhere, its rounds and ledger logged through the API


class RunStatus(enum.StrEnum):
    queued = "queued"
    preparing = "preparing"  # claimed by a worker: loading data, calibrating σ, setting up
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.succeeded, RunStatus.failed, RunStatus.cancelled)


# A worker holds the run (its heartbeat keeps it); the statuses before it ends.
CLAIMED = (RunStatus.preparing, RunStatus.running)
LIVE = (RunStatus.queued, *CLAIMED)


def new_id() -> str:
    return uuid.uuid4().hex[:16]


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow, index=True)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.queued, index=True)
    algorithm: Mapped[str] = mapped_column(String(64), index=True)
    dataset: Mapped[str] = mapped_column(String(64), index=True)
    sweep_id: Mapped[str | None] = mapped_column(ForeignKey("sweeps.id", ondelete="SET NULL"), index=True)
    # The client's `Idempotency-Key` header: a retried POST with the same key finds this run.
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True, index=True)
    # The runs of a sweep that train together in one worker task (`dpfl.batching`); None: alone.
    batch_id: Mapped[str | None] = mapped_column(String(36), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The spec's seed and params, read from the JSON by the database: the runs list shows them
    # without loading whole specs (deferred: loaded when read, or undeferred by the list).
    seed: Mapped[int | None] = column_property(spec.column["seed"].as_integer(), deferred=True)
    params: Mapped[Any] = column_property(spec.column["params"], deferred=True)
    # Its sweep's name, for the runs list's sweep column (deferred like seed and params).
    sweep_name: Mapped[str | None] = column_property(
        select(Sweep.name).where(Sweep.id == sweep_id).correlate_except(Sweep).scalar_subquery(),
        deferred=True,
    )
    rounds: Mapped[int] = mapped_column(Integer)
    current_round: Mapped[int] = mapped_column(Integer, default=0)
    # What a preparing run is doing ("calibrating σ"); None once it trains.
    phase: Mapped[str | None] = mapped_column(String(64))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    notion: Mapped[str] = mapped_column(String(16), default="none")
    target_epsilon: Mapped[float | None] = mapped_column(Float)
    projected_epsilon: Mapped[float | None] = mapped_column(Float)
    epsilon: Mapped[float | None] = mapped_column(Float)
    # An external run: where it came from, and the ε its own tool reported (shown beside ours,
    # never used as its ε: that is always recomputed from its ledger).
    source: Mapped[str] = mapped_column(
        String(16), default=RunSource.native, server_default=RunSource.native.value, index=True
    )
    reported_epsilon: Mapped[float | None] = mapped_column(Float)
    delta: Mapped[float | None] = mapped_column(Float)
    accountant: Mapped[str | None] = mapped_column(String(16))
    noise_multiplier: Mapped[Any] = mapped_column(JSON, nullable=True)
    final_accuracy: Mapped[float | None] = mapped_column(Float)
    final_loss: Mapped[float | None] = mapped_column(Float)
    # The best test accuracy of any evaluated round (a column of the runs list and its CSV): loaded
    # with the run, one indexed lookup, so a run read after its session closed still has it.
    best_accuracy: Mapped[float | None] = column_property(
        select(func.max(RoundMetric.accuracy))
        .where(RoundMetric.run_id == id)
        .correlate_except(RoundMetric)
        .scalar_subquery()
    )
    # The balanced accuracy of its last evaluated round (the round `final_accuracy` is of), as
    # `best_accuracy` is loaded: None for a run recorded before balanced accuracy was, or withheld.
    final_balanced_accuracy: Mapped[float | None] = column_property(
        select(RoundMetric.balanced_accuracy)
        .where(RoundMetric.run_id == id)
        .correlate_except(RoundMetric)
        .order_by(RoundMetric.round.desc())
        .limit(1)
        .scalar_subquery()
    )
    # A dataset with a privacy budget: noise from OS entropy, diagnostics withheld.
    protected: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # RunResult.diagnostics(): label histogram and records per user, labelled "not private"
    diagnostics: Mapped[Any] = mapped_column(JSON, nullable=True)
    warning: Mapped[str | None] = mapped_column(Text)  # what the privacy result warns of (RunResult)
    caveats: Mapped[Any] = mapped_column(JSON, nullable=True)  # what the ε rests on or does not cover
    timings: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(255))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)
    # When its queue message was last sent (None: not yet). The dispatcher sends a queued run's
    # message again when this is older than `dispatch_timeout_s` and the broker holds none.
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime)
    # What its user calls and makes of it (PATCH /api/runs/{id}); archived runs leave the list.
    name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    tags: Mapped[list[str]] = mapped_column(JSON, default=list, server_default=text("'[]'"))
    notes: Mapped[str] = mapped_column(Text, default="", server_default="")
    archived: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)

    @property
    def duration_s(self) -> float | None:
        """Returns seconds from start to finish (or to now while running)."""
        if self.started_at is None:
            return None
        end = self.finished_at or utcnow()
        start = self.started_at if self.started_at.tzinfo else self.started_at.replace(tzinfo=dt.UTC)
        end = end if end.tzinfo else end.replace(tzinfo=dt.UTC)
        return (end - start).total_seconds()

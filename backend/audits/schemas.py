"""Audit resources as the API shows them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_TRIALS", "MIN_TRIALS", "AuditCreate", "AuditRead"]

MIN_TRIALS = 10_000
MAX_TRIALS = 1_000_000


class AuditCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # per side of the statistical audit; more trials give a tighter (larger) lower bound
    trials: int = Field(MAX_TRIALS, ge=MIN_TRIALS, le=MAX_TRIALS)


class AuditRead(BaseModel):
    """One audit of a run's round-1 releases; `result.releases[]` is `ReleaseAudit.to_json()`
    (release, epsilon_lower at 95 %, epsilon_ledger, max_sensitivity_ratio, trials, sound, ...)."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    run_id: str
    status: str
    trials: int
    result: dict[str, Any] | None
    error: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None

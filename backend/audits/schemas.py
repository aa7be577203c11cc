"""Audit resources as the API shows them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MAX_BLACK_BOX_TRIALS", "MAX_SEEDS", "MAX_TRIALS", "MIN_TRIALS", "AuditCreate", "AuditRead"]

MIN_TRIALS = 10_000
MAX_TRIALS = 1_000_000
MAX_SEEDS = 10
MAX_BLACK_BOX_TRIALS = 10_000  # each one a run of two rounds per side


class AuditCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # per side of the statistical audit; more trials give a tighter (larger) lower bound
    trials: int = Field(MAX_TRIALS, ge=MIN_TRIALS, le=MAX_TRIALS)
    # seeds of trials; a violation is proven at 99 % for every release and seed together
    seeds: int = Field(1, ge=1, le=MAX_SEEDS)
    # runs per side of the black-box trials (the real release path, two rounds); 0: none
    black_box_trials: int = Field(
        1_000,
        ge=0,
        le=MAX_BLACK_BOX_TRIALS,
        json_schema_extra={"anyOf": [{"const": 0}, {"minimum": 100}]},  # as `_enough_to_split` says
    )

    @field_validator("black_box_trials")
    @classmethod
    def _enough_to_split(cls, value: int) -> int:
        if 0 < value < 100:
            raise ValueError("must be 0 (none) or ≥ 100: half the runs choose the test, half bound it")
        return value


class AuditRead(BaseModel):
    """One audit of a run; `result.releases[]` is `ReleaseAudit.to_json()` (release, epsilon_lower
    at `confidence`, epsilon_ledger, max_sensitivity_ratio, trials, verdict, ...) for round 1, and
    `result.black_box` the black-box trials' `BlackBoxAudit.to_json()` (absent with none)."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    run_id: str
    status: str
    trials: int
    seeds: int
    black_box_trials: int
    result: dict[str, Any] | None
    error: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None

"""A spec's privacy projection as the API shows it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["ProjectionRead"]


class ProjectionRead(BaseModel):
    notion: str = Field(description="the algorithm's privacy notion (`none` for a non-private run)")
    epsilon: float | None = Field(description="projected ε after the last round (None: not private)")
    target_epsilon: float | None = Field(description="the spec's ε target, when it gives one")
    noise_multiplier: float | list[float] | None = Field(
        description="σ: calibrated to the ε target, or the spec's own; one per silo where it varies"
    )
    delta: float | None
    accountant: str | None
    planned_epsilon: list[float] = Field(description="projected ε after each round, from round 1")
    budget: float | None = Field(description="the dataset's remaining ε budget; None when it has none")
    label_histogram: list[list[int]] | None = Field(
        description="records per class in each silo, [silos][classes]: a diagnostic (not private), "
        "None for a dataset with a budget"
    )
    partition_figure: dict[str, Any] | None = Field(description="the histogram as Plotly figure JSON")
    not_guaranteed: str | None = Field(
        None,
        description="what the run would release that its ledger does not cover (a preprocessing step "
        "fitted without noise, a data-dependent setting): its ε would not bound what it leaks; null: nothing",
    )
    implausible: list[str] = Field(
        default_factory=list,
        description="settings that run and mislead on this data, one sentence each: δ at least 1/n, more "
        "users than records, an expected batch under one",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="why this setting is slow to start or to run (an algorithm's measured costs, a "
        "projection that took seconds), before it holds a worker",
    )

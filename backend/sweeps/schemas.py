"""Sweep resources as the API takes and shows them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from backend.runs.schemas import Annotations, RunRead

__all__ = [
    "AlgorithmPreview",
    "ParetoPoint",
    "ReferenceLine",
    "SummaryRow",
    "SweepBatch",
    "SweepCreate",
    "SweepCreated",
    "SweepDetail",
    "SweepPage",
    "SweepPatch",
    "SweepPreview",
    "SweepRead",
    "SweepSummary",
]


class SweepCreate(BaseModel):
    """A base run spec and a grid of field values; every combination becomes a run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "ε sweep on digits",
                    "base": {
                        "params": {"lr": 0.5, "batch_size": 64},
                        "params_by_algorithm": {"isrl_mbsgd": {"clip": 1.0}},
                        "dataset": {"name": "digits", "silos": 4},
                        "rounds": 20,
                        "privacy": {"delta": 1e-5},
                    },
                    "grid": {
                        "algorithm": ["isrl_mbsgd", "fedavg"],
                        "privacy.epsilon": [0.5, 1, 2],
                        "seed": [0, 1, 2],
                    },
                }
            ]
        },
    )

    name: str = Field("", max_length=200)
    base: dict[str, Any] = Field(
        description="a RunSpec, plus optional `params_by_algorithm: {name: {param: value}}` and "
        "`model_by_algorithm: {name: model}` (the model of that algorithm's points)"
    )
    grid: dict[str, Any] = Field(
        default_factory=dict, description="dotted spec field → list of values, e.g. `privacy.epsilon: [1, 2]`"
    )


class AlgorithmPreview(BaseModel):
    """One algorithm's share of a sweep that is not yet submitted."""

    algorithm: str
    models: list[str] = Field(description="the model names its runs use")
    runs: int
    tasks: int = Field(description="worker tasks its runs form: a batch of runs that train together is one")
    seconds_per_round: float | None = Field(
        description="median seconds per round of its latest succeeded runs on the sweep's dataset here; "
        "null when it has none to estimate from"
    )
    past_runs: int = Field(description="how many past runs the pace is the median of")


class SweepPreview(BaseModel):
    """POST /api/sweeps/preview: what submitting the sweep would queue, and how long it may take."""

    num_runs: int
    tasks: int = Field(description="worker tasks in all (each batch of runs is one)")
    estimated_seconds: float | None = Field(
        description="estimated worker time, one task after another: each task's rounds at its "
        "algorithm's past pace here; null when an algorithm has no past run to estimate from"
    )
    algorithms: list[AlgorithmPreview]


class SweepPatch(Annotations):
    """PATCH /api/sweeps/{id}: any of `name`, `tags`, `notes`, `archived` (its runs are left as they are)."""


class SweepRead(BaseModel):
    """A sweep, how many of its runs are in each status, and their mean progress in [0, 1]."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    tags: list[str] = []
    notes: str = ""
    archived: bool = False
    created_at: dt.datetime
    num_runs: int
    base: dict[str, Any]
    grid: dict[str, Any]
    counts: dict[str, int]
    progress: float


class SweepCreated(SweepRead):
    run_ids: list[str]


class SweepBatch(BaseModel):
    """Runs of the sweep that train together in one worker task (`dpfl.batching`)."""

    id: str
    algorithm: str
    run_ids: list[str]


class SweepDetail(SweepRead):
    runs: list[RunRead]
    batches: list[SweepBatch] = Field(
        description="the runs that train together, in order of creation; the other runs train alone"
    )


class SweepPage(BaseModel):
    items: list[SweepRead]
    total: int
    offset: int
    limit: int
    next_offset: int | None


class SummaryRow(BaseModel):
    """The succeeded runs of one algorithm and one configuration at one privacy target: one per seed."""

    algorithm: str
    setting: str | None = Field(
        None,
        description="what sets this configuration apart from the algorithm's others, e.g. 'δ = 0.1'; "
        "null when the sweep has one configuration of it",
    )
    notion: str
    target_epsilon: float | None
    noise_multiplier: float | None
    n: int
    metric: str = Field(
        "accuracy",
        description="the test metric accuracy_mean and accuracy_std are in: the dataset's headline metric, "
        "`accuracy`, or `balanced_accuracy` (creditcard)",
    )
    accuracy_mean: float | None
    accuracy_std: float | None = Field(description="sample standard deviation (ddof 1); null when n = 1")
    epsilon_mean: float | None = Field(description="mean ε spent; null for a non-private algorithm")
    epsilon_max: float | None


class ParetoPoint(BaseModel):
    """A row on its frontier: one frontier per notion, metric and dataset (their units)."""

    algorithm: str
    epsilon: float
    accuracy: float
    notion: str
    metric: str
    dataset: str | None


class ReferenceLine(BaseModel):
    """A non-private algorithm's accuracy, drawn across the accuracy-against-ε plot."""

    algorithm: str
    n: int
    accuracy_mean: float | None
    accuracy_std: float | None


class SweepSummary(BaseModel):
    sweep_id: str
    counts: dict[str, int]
    rows: list[SummaryRow]
    pareto: list[ParetoPoint]
    reference: list[ReferenceLine]

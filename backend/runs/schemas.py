"""Run resources as the API shows them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["LedgerRead", "MetricRead", "RunDetail", "RunPage", "RunRead"]


class RunRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    status: str
    algorithm: str
    dataset: str
    sweep_id: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    duration_s: float | None
    rounds: int
    current_round: int
    progress: float
    notion: str
    target_epsilon: float | None
    projected_epsilon: float | None
    epsilon: float | None
    delta: float | None
    accountant: str | None
    noise_multiplier: Any
    final_accuracy: float | None
    final_loss: float | None
    error: str | None
    # what the privacy result warns of: an under-protecting calibration, or a leak the ledger misses
    warning: str | None = None
    # a dataset with a budget: noise from OS entropy, diagnostics withheld
    protected: bool = False
    worker: str | None
    attempts: int
    cancel_requested: bool


class RunDetail(RunRead):
    """One run as its own page shows it: the list's fields and where its time went."""

    # setup_s, train_s, eval_s, total_s and the torch threads the run had; None until it ends
    timings: dict[str, int | float] | None
    # what the ε rests on or does not cover: [{kind, text, breaks_guarantee}]; None until it ends
    caveats: list[dict[str, Any]] | None = None
    # not private: label histogram and records per user, labelled; None until it ends
    diagnostics: dict[str, Any] | None = None


class RunPage(BaseModel):
    items: list[RunRead]
    total: int
    offset: int
    limit: int
    next_offset: int | None


class MetricRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    round: int
    accuracy: float
    loss: float
    epsilon: float | None
    metrics: dict[str, Any] | None  # private: functions of the releases and public data
    # not private (train_loss, clip fraction, ...): computed on private data without noise; None when withheld
    diagnostics: dict[str, Any] | None = None


class LedgerRead(BaseModel):
    """The ledger of a run recomputed by one accountant: ε per party per round, and the rows.

    `approximate` and `data_dependent` flag an ε that is not a sound, data-independent bound
    (gdp's CLT, pate), which `notes` explains; such an ε is never the run's headline.
    """

    accountant: str
    delta: float
    epsilon: float | None
    approximate: bool
    data_dependent: bool
    notes: list[str]
    rounds: list[int]
    parties: dict[str, list[float]]
    events: list[dict[str, Any]]

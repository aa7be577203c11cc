"""Run resources as the API shows them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from dpfl.plots.baseline import no_better_than_guessing, run_baseline

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

    # --- the majority-class baseline (issue 18), from the diagnostics: not private, None when withheld
    @computed_field
    @property
    def baseline_accuracy(self) -> float | None:
        """Accuracy of always predicting the evaluation set's commonest label (not private)."""
        baseline = run_baseline(self.diagnostics)
        return None if baseline is None else baseline["accuracy"]

    @computed_field
    @property
    def no_better_than_guessing(self) -> bool | None:
        """A private run whose final accuracy is within the guessing margin of `baseline_accuracy`."""
        if self.notion == "none":
            return None
        return no_better_than_guessing(self.final_accuracy, run_baseline(self.diagnostics))


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

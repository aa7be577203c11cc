"""The schema of a config's `reproduce:` block (dpfl.reproduce.manifest says what each part does).

Pure pydantic models: what can be checked on the block alone. What needs the grid or the
algorithms (a method's name, a swept key) is checked by `manifest`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Candidate",
    "Ceiling",
    "Claim",
    "Metric",
    "PaperValue",
    "QuickBlock",
    "ReproduceBlock",
    "Variation",
]

Metric = Literal["accuracy", "test_error", "loss"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_metric_value(metric: str, value: float) -> None:
    if metric in ("accuracy", "test_error") and not 0 <= value <= 1:
        raise ValueError(f"`value` of a {metric} must be a fraction in [0, 1] (12.5 % is 0.125); got {value}")
    if metric == "loss" and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"`value` of a loss must be a finite number ≥ 0; got {value}")


class QuickBlock(_Strict):
    """What `--quick` changes: dotted overrides of the base, replacement grid entries, the seeds;
    or, with `skip`, why the config is left out of `--quick` (run only in the full sweep)."""

    set: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    seeds: int | None = Field(None, ge=1, le=100)
    skip: str | None = Field(None, min_length=1)


class PaperValue(_Strict):
    """One number the paper reports, for the cell (algorithm, x) of the variants matching `where`.

    `epsilon` is the ε the paper states for it (default: `x`, when x is `privacy.epsilon`).
    """

    algorithm: str
    x: float | None = None  # None: a non-private result (no x)
    metric: Metric
    value: float
    source: str = Field(min_length=1)
    epsilon: float | None = Field(None, gt=0)
    where: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _value_in_range(self) -> PaperValue:
        _check_metric_value(self.metric, self.value)
        return self


class Claim(_Strict):
    """ "`better` beats `than` on `metric`, by at least `by` if given", on the mean over x values.

    `round` checks it at that round's evaluation instead of the last one: how a claim about
    convergence speed ("A converges faster than B") is tested. The round must be evaluated in
    the full and the quick sweep alike (`eval_every`), so both check the same thing.
    `than_at` compares `better` at every x with `than` at that one x (a paper that sets each of
    its methods at every μ against its baseline at μ = 1).
    """

    text: str = Field(min_length=1)
    better: str
    than: str
    metric: Metric
    by: float | None = Field(None, ge=0)
    round: int | None = Field(None, ge=1)
    than_at: float | None = None
    where: dict[str, Any] = Field(default_factory=dict)


class Candidate(_Strict):
    """One setting a tuned method may take: a label for the report and the fields it sets.

    `rounds` lets a method run as long as another sends messages: a comparison at equal releases
    (MB-SGD with R = 99 against Alg. 11's 2R − 1 = 99 at R = 50) is a method with one candidate.
    """

    label: str = Field(min_length=1)
    set: dict[str, Any] = Field(min_length=1)

    @field_validator("set")
    @classmethod
    def _only_the_method(cls, values: dict[str, Any]) -> dict[str, Any]:
        for key in values:
            if key not in ("algorithm", "params", "rounds") and not key.startswith("params."):
                raise ValueError(
                    f"may set `algorithm`, `params`, `params.<name>` or `rounds` only; got {key!r}"
                )
        return values


class Variation(Candidate):
    """A candidate of a sensitivity table: a method's fields, or the calibration of its σ."""

    @field_validator("set")
    @classmethod
    def _only_the_method(cls, values: dict[str, Any]) -> dict[str, Any]:
        for key in values:
            if key != "privacy.calibration":
                Candidate._only_the_method({key: values[key]})
        return values


class Ceiling(_Strict):
    """The fields that take a run's noise away (e.g. a tiny `privacy.noise_multiplier` in place of
    the ε target), and the methods to run so; none listed: every method of the grid."""

    set: dict[str, Any] = Field(min_length=1)
    methods: list[str] = Field(default_factory=list)


class ReproduceBlock(_Strict):
    """The `reproduce:` block of a config (see the module docstring)."""

    title: str = Field(min_length=1)
    grid: dict[str, list[Any]] = Field(min_length=1)
    params_by_algorithm: dict[str, dict[str, Any]] = Field(default_factory=dict)
    seeds: int = Field(1, ge=1, le=100)
    quick: QuickBlock | None = None
    x: str = "privacy.epsilon"
    paper: list[PaperValue] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)
    tune: dict[str, list[Candidate]] = Field(default_factory=dict)
    sensitivity: dict[str, list[Variation]] = Field(default_factory=dict)
    ceiling: Ceiling | None = None
    notes: str = ""

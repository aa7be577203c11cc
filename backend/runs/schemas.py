"""Run resources as the API shows them."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, computed_field
from pydantic_core import PydanticCustomError

from dpfl.data import headline_metric
from dpfl.metrics import in_metric
from dpfl.plots.baseline import no_better_than_guessing, run_baseline
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL

__all__ = [
    "MAX_TAGS",
    "Annotations",
    "LedgerRead",
    "MetricRead",
    "Projection",
    "RoundRecorded",
    "RunDetail",
    "RunPage",
    "RunPatch",
    "RunRead",
    "Tags",
]

MAX_TAGS = 20
MAX_TAG_CHARS = 40


def _clean_tags(tags: list[str]) -> list[str]:
    """Returns the tags trimmed and de-duplicated in order; refuses an empty, long or comma'd tag.

    No commas: the CSV export joins a run's tags with commas.
    """
    out: list[str] = []
    for i, raw in enumerate(tags):
        tag = raw.strip()
        if not 1 <= len(tag) <= MAX_TAG_CHARS or "," in tag:
            # the message goes through the context: braces in a tag are not a template
            message = (
                f"tag {i} must be 1 to {MAX_TAG_CHARS} characters after trimming, without commas; got {raw!r}"
            )
            raise PydanticCustomError("tag", "{message}", {"message": message})
        if tag not in out:
            out.append(tag)
    return out


# Python's whitespace (what `str.strip` trims): ECMA's `\s` differs (it lacks \x1c-\x1f and \x85)
_SPACE = "\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
_INNER = f"[^,\\x00{_SPACE}]"  # a tag's first and last character
TAG_PATTERN = f"^[{_SPACE}]*{_INNER}(?:[^,\\x00]{{0,{MAX_TAG_CHARS - 2}}}{_INNER})?[{_SPACE}]*$"
"""A tag as `_clean_tags` takes it, for the OpenAPI schema (the validator gives the message)."""

Tags = Annotated[
    list[Annotated[str, Field(json_schema_extra={"pattern": TAG_PATTERN})]],
    Field(
        max_length=MAX_TAGS,
        description=f"at most {MAX_TAGS} tags of 1 to {MAX_TAG_CHARS} characters, no commas",
    ),
    AfterValidator(_clean_tags),
]


class Annotations(BaseModel):
    """What a user may change of a run or a sweep: only the fields sent change; null is refused."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "baseline", "tags": ["paper", "mnist"], "archived": False}]},
    )

    name: str = Field(None, max_length=200, description='at most 200 characters; "" clears it')
    tags: Tags = Field(None, description="replaces the tags: trimmed, de-duplicated, each 1 to 40 characters")
    notes: str = Field(None, max_length=10_000, description="free text, at most 10,000 characters")
    archived: StrictBool = Field(
        None,
        description="true or false (not 0 or 1); archived items leave the lists unless `archived=true|all`",
    )

    def changes(self) -> dict[str, Any]:
        """Returns the fields that were sent, by name."""
        return self.model_dump(exclude_unset=True)


class RunPatch(Annotations):
    """PATCH /api/runs/{id}: any of `name`, `tags`, `notes`, `archived`."""


class RunRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str = ""
    tags: list[str] = []
    notes: str = ""
    archived: bool = False
    status: str
    algorithm: str
    dataset: str
    sweep_id: str | None
    sweep_name: str | None = Field(None, description="its sweep's name")
    batch_id: str | None = Field(
        None, description="the batch of its sweep it trains in, in one worker task (null: alone)"
    )
    seed: int | None = Field(None, description="the spec's seed")
    params: dict[str, Any] | None = Field(None, description="the spec's algorithm params")
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    duration_s: float | None
    rounds: int
    current_round: int
    phase: str | None = Field(None, description="what a preparing run is doing, e.g. `calibrating σ`")
    progress: float
    notion: str
    target_epsilon: float | None
    projected_epsilon: float | None
    epsilon: float | None
    delta: float | None
    accountant: str | None
    source: str = Field(
        "native", description="`native`: run by this server; `external`: logged from elsewhere"
    )
    reported_epsilon: float | None = Field(
        None, description="an external run's ε as its own tool reported it (ours is `epsilon`)"
    )
    noise_multiplier: Any
    final_accuracy: float | None
    final_loss: float | None
    best_accuracy: float | None = Field(None, description="the best test accuracy of any evaluated round")
    final_balanced_accuracy: float | None = Field(
        None,
        description="the last evaluated round's balanced accuracy (mean per-class recall); null where "
        "withheld or not recorded",
    )
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

    # setup_s, train_s, eval_s, total_s, the torch threads the run had and the runs it trained
    # with (batch_runs, 1: alone); None until it ends
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
    def baseline_label(self) -> str | None:
        """Says what `baseline_accuracy`, `chance_baseline` and `no_better_than_guessing` are:
        computed from the evaluation set's label counts without noise (not private); None when
        they are withheld."""
        return None if run_baseline(self.diagnostics) is None else DIAGNOSTICS_LABEL

    @computed_field
    @property
    def headline_metric(self) -> str:
        """The test metric its dataset's results are reported in (`dpfl.data.headline_metric`), the
        one `no_better_than_guessing` judges: `accuracy`, or `balanced_accuracy` (creditcard)."""
        return headline_metric(self.dataset)

    @computed_field
    @property
    def chance_baseline(self) -> float | None:
        """What always predicting the commonest label scores in `headline_metric` (not private): the
        majority rate (`baseline_accuracy`) for accuracy, 1/|K| for balanced accuracy."""
        baseline = run_baseline(self.diagnostics, self.headline_metric)
        return None if baseline is None else baseline["accuracy"]

    @computed_field
    @property
    def no_better_than_guessing(self) -> bool | None:
        """A private run whose final value in `headline_metric` (`final_accuracy` or
        `final_balanced_accuracy`) is within the guessing margin of `chance_baseline`."""
        if self.notion == "none":
            return None
        metric = self.headline_metric
        final = in_metric(
            metric, accuracy=self.final_accuracy, balanced_accuracy=self.final_balanced_accuracy
        )
        return no_better_than_guessing(final, run_baseline(self.diagnostics, metric))


class RoundRecorded(BaseModel):
    """POST /api/runs/{id}/rounds: the round as stored, and the run's ε recomputed after it."""

    round: int
    epsilon: float | None = Field(description="the run's ε after this round, by our accountant")
    reported_epsilon: float | None = Field(description="the ε its tool last reported")
    replayed: bool = Field(description="true: this round was stored before, by the same request")


class RunPage(BaseModel):
    items: list[RunRead]
    total: int
    offset: int
    limit: int
    next_offset: int | None


class MetricRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    round: int
    # test metrics; None when withheld (a protected run whose test split is not public by declaration)
    accuracy: float | None
    # mean per-class recall; None when withheld, or for rounds recorded before it was measured
    balanced_accuracy: float | None = None
    loss: float | None
    epsilon: float | None
    metrics: dict[str, Any] | None  # private: functions of the releases and public data
    # not private (train_loss, clip fraction, ...): computed on private data without noise; None when withheld
    diagnostics: dict[str, Any] | None = None


class Projection(BaseModel):
    """A spec's notion, σ and projected ε, as admission reserves them (`runs.service.project`);
    POST /api/privacy/project shows them in a `ProjectionRead` with the budget left."""

    notion: str
    epsilon: float | None = Field(description="projected ε after the last round (None: not private)")
    noise_multiplier: float | list[float] | None = Field(
        description="σ: calibrated to the ε target, or the spec's own; one per silo where it varies"
    )
    delta: float | None
    accountant: str | None
    planned_epsilon: list[float] = Field(description="projected ε after each round, from round 1")
    bound_epsilon: float | None = Field(
        None,
        description="the most ε any secret participation draw of a protected run can plan (it reserves this)",
    )
    uncovered: str | None = Field(
        None, description="what the run would release that its ledger does not cover; null: nothing"
    )
    implausible: list[str] = Field(
        default_factory=list, description="settings that run and mislead on this data (`dpfl.plausibility`)"
    )


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
    parties: dict[str, list[float | None]] = Field(description="ε per round per party; null where not finite")
    events: list[dict[str, Any]]

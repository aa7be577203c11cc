"""Algorithm catalogue entries as the API shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["AlgorithmRead"]


class AlgorithmRead(BaseModel):
    name: str = Field(description="registry key, used as `algorithm` in a RunSpec")
    paper: str
    notion: str = Field(description="the privacy notion: none, record, user, agent, instance or gdp")
    private: bool = Field(description="whether the algorithm releases anything under differential privacy")
    summary: str
    params_schema: dict[str, Any] = Field(description="JSON Schema of `params` (drives the new-run form)")
    defaults: dict[str, Any] = Field(description="the parameters used when `params` omits them")
    models: list[str] = Field(
        description="the registered models (`model.name`) it trains, sorted; every registered model "
        "when it is not restricted. A spec with another model is refused at submission (422)."
    )
    datasets: list[str] = Field(
        description="the registered datasets (`dataset.name`) it runs on with its `defaults`: those "
        "that need no files first (bundled or generated), then the others, each by name; every "
        "registered dataset when none is ruled out. A form switching to this algorithm can take the "
        "first when its dataset is not listed. Other datasets may run with other params (e.g. a "
        "smaller `public_pool`); submission checks the spec's own."
    )
    requires_users: bool = Field(
        description="whether a spec must give `dataset.users` (who owns each record), e.g. "
        "{kind: uniform, count: 100}; refused at submission without it (422)"
    )
    binary_labels: bool = Field(
        description="whether the dataset must have two classes; `datasets` lists only such ones "
        "(and csv, whose classes are known once loaded)"
    )

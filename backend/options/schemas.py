"""The registries' names and options as GET /api/options shows them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["AccountantOption", "KindOption", "ModelOption", "Options"]


class ModelOption(BaseModel):
    name: str = Field(description="registry key, used as `model.name` in a RunSpec")
    description: str
    takes_hidden: bool = Field(description="whether `model.hidden` (hidden layer widths) applies")
    options: dict[str, Any] = Field(
        description="the model's own options (`model.<option>`) and their defaults"
    )


class KindOption(BaseModel):
    name: str = Field(description="the kind's name, used as `kind`")
    description: str
    options: dict[str, dict[str, Any]] = Field(
        description="the options this kind takes: name → JSON Schema (type, bounds, default)"
    )


class AccountantOption(BaseModel):
    name: str = Field(description="registry key, used as `privacy.accountant`")
    description: str
    data_dependent: bool = Field(description="its ε is computed from private data (so never a headline)")
    approximates: bool = Field(
        description="some releases are accounted by an approximation (may underestimate ε)"
    )
    headline_always: bool = Field(
        description="whether it can give a run's headline ε (σ calibrated on it, budget charged) for every "
        "plan; false: never (data-dependent) or only for plans it accounts exactly (see `headline`)"
    )
    headline: str = Field(description="when it may be a run's headline accountant, in one sentence")


class Options(BaseModel):
    """Everything the new-run form offers, read from the dpfl registries (datasets: GET /api/datasets;
    algorithms with their params: GET /api/algorithms)."""

    models: list[ModelOption]
    partition_kinds: list[KindOption] = Field(description="`dataset.partition.kind`")
    user_kinds: list[KindOption] = Field(description="`dataset.users.kind`")
    accountants: list[AccountantOption]
    default_accountant: str = Field(description="the accountant a spec gets when it names none")
    calibrations: list[str] = Field(
        description="`privacy.calibration`: how σ is chosen for an ε target (the first is the default)"
    )
    notions: list[str] = Field(description="the privacy notions algorithms declare; `none` is not private")
    spec_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="what a spec field left out takes (`rounds`, `dataset.silos`, `seed`): what a blank box "
        "in the new-run form means",
    )

"""Privacy budgets as the API takes and shows them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dpfl.algorithms.base import NOTIONS
from dpfl.privacy.events import NEIGHBOURING

__all__ = ["BudgetRead", "BudgetUpdate", "ChargeRead", "SiloUsage"]


Notion = Literal[tuple(n for n in NOTIONS if n != "none")]  # type: ignore[valid-type]
Neighbouring = Literal[NEIGHBOURING]  # type: ignore[valid-type]


class BudgetUpdate(BaseModel):
    """A budget's total ε, and its unit: ε at `delta`, per one `notion` unit under `neighbouring`.

    Without a notion, the first run charged sets it. δ and the unit are fixed once a run is charged.
    An unknown field is refused (a misspelt `public_test` would otherwise leave the test split private).
    """

    model_config = ConfigDict(extra="forbid")

    total_epsilon: float = Field(gt=0, le=1e6, description="the dataset's total ε")
    delta: float = Field(1e-5, gt=0, lt=1, description="the δ every charge's ε is taken at")
    notion: Notion | None = Field(None, description="the unit a run's ε must be per; null: the first run's")
    neighbouring: Neighbouring | None = Field(
        None, description="the neighbouring relation; null: add_remove with a notion, else the first run's"
    )
    public_test: bool = Field(
        False,
        description="the test split is public by the owner's declaration: runs' test metrics are served "
        "(otherwise withheld), and voting algorithms may carve their public pool from it",
    )


class SiloUsage(BaseModel):
    """One natural silo's share of a budget: what its releases spent, and what is reserved and left."""

    spent: float
    reserved: float
    remaining: float


class ChargeRead(BaseModel):
    """One run's charge: `reserved` at admission (its projected ε), `spent` once settled."""

    run_id: str
    reserved: float
    spent: float | None
    settled: bool


class BudgetRead(BaseModel):
    """A dataset's total ε, what is spent (settled runs), reserved (open runs) and left, and its charges."""

    dataset: str
    total_epsilon: float
    spent: float
    reserved: float
    remaining: float
    delta: float
    notion: str | None = Field(
        description="the unit's notion; null until a notion is set or a run is charged"
    )
    neighbouring: str | None
    public_test: bool
    unit: str = Field(
        description="the unit in words, e.g. 'ε at δ = 1e-05 per record, add/remove neighbours'"
    )
    silos: dict[str, SiloUsage] | None = Field(
        description="silo ↦ its own spending, for a dataset with natural silos; null for any other"
    )
    charges: list[ChargeRead]

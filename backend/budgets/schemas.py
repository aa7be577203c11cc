"""Privacy budgets as the API takes and shows them."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["BudgetRead", "BudgetUpdate", "ChargeRead", "SiloUsage"]


class BudgetUpdate(BaseModel):
    total_epsilon: float = Field(gt=0, le=1e6, description="the dataset's total ε")


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
    silos: dict[str, SiloUsage] | None = Field(
        description="silo ↦ its own spending, for a dataset with natural silos; null for any other"
    )
    charges: list[ChargeRead]

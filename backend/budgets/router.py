"""HTTP for privacy budgets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from backend.budgets import service
from backend.deps import SessionDep, WriteGuard

router = APIRouter(prefix="/budgets", tags=["budgets"])


class BudgetUpdate(BaseModel):
    total_epsilon: float = Field(gt=0, le=1e6, description="the dataset's total ε")


@router.get("")
def list_budgets(session: SessionDep) -> list[dict[str, Any]]:
    """Every dataset's budget."""
    return service.list_budgets(session)


@router.get("/{dataset}", responses={404: {"description": "the dataset has no budget"}})
def get_budget(dataset: str, session: SessionDep) -> dict[str, Any]:
    """A dataset's total ε, what is spent, reserved and remaining, and the runs charged."""
    return service.get_budget(session, dataset)


@router.put("/{dataset}", dependencies=[WriteGuard])
def put_budget(dataset: str, body: BudgetUpdate, session: SessionDep) -> dict[str, Any]:
    """Set a dataset's total ε budget."""
    budget = service.put_budget(session, dataset=dataset, total_epsilon=body.total_epsilon)
    session.commit()  # committed before the answer: the next admission sees the budget
    return budget

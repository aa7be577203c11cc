"""HTTP for privacy budgets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from backend.budgets import service
from backend.datasets.service import list_uploads
from backend.deps import SessionDep, SettingsDep, WriteGuard
from dpfl.data import registered_datasets

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


@router.put(
    "/{dataset}",
    dependencies=[WriteGuard],
    responses={404: {"description": "no dataset of this name, registered or uploaded"}},
)
def put_budget(
    dataset: str, body: BudgetUpdate, session: SessionDep, settings: SettingsDep
) -> dict[str, Any]:
    """Set a dataset's total ε budget (a registered dataset or an upload)."""
    known = [*registered_datasets(), *(u["name"] for u in list_uploads(settings))]
    budget = service.put_budget(session, dataset=dataset, total_epsilon=body.total_epsilon, known=known)
    session.commit()  # committed before the answer: the next admission sees the budget
    return budget


@router.delete(
    "/{dataset}",
    status_code=204,
    dependencies=[WriteGuard],
    responses={
        404: {"description": "the dataset has no budget"},
        409: {"description": "a run on the dataset is queued or running"},
    },
)
def delete_budget(dataset: str, session: SessionDep) -> Response:
    """Delete a dataset's budget and its charges (its runs stay protected)."""
    service.delete_budget(session, dataset)
    session.commit()
    return Response(status_code=204)

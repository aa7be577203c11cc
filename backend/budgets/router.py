"""HTTP for privacy budgets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from backend.budgets import service
from backend.budgets.schemas import BudgetRead, BudgetUpdate
from backend.datasets.service import list_uploads
from backend.deps import SessionDep, SettingsDep, WriteGuard
from backend.errors import ParameterError
from backend.settings import Settings
from dpfl.data import registered_datasets

router = APIRouter(prefix="/budgets", tags=["budgets"])


@router.get("", response_model=list[BudgetRead])
def list_budgets(session: SessionDep) -> Any:
    """Every dataset's budget."""
    return service.list_budgets(session)


@router.get(
    "/{dataset}", response_model=BudgetRead, responses={404: {"description": "the dataset has no budget"}}
)
def get_budget(dataset: str, session: SessionDep) -> Any:
    """A dataset's total ε, what is spent, reserved and remaining, and the runs charged."""
    return service.get_budget(session, dataset)


@router.put(
    "/{dataset}",
    response_model=BudgetRead,
    dependencies=[WriteGuard],
    responses={
        404: {"description": "no dataset of this name, registered or uploaded; the detail lists them"},
        409: {
            "description": "the data is under another budget, or a charged budget's δ or unit would change"
        },
        422: {
            "description": "`total_epsilon` is not in (0, 1e6], `delta` not in (0, 1), or no data is named"
        },
    },
)
def put_budget(
    # `csv` is the loader of any file, not data: a budget goes on an upload's name (`service._new_budget`)
    dataset: Annotated[str, Path(json_schema_extra={"not": {"const": "csv"}})],
    body: BudgetUpdate,
    session: SessionDep,
    settings: SettingsDep,
) -> Any:
    """Set a dataset's total ε budget (a registered dataset or an upload), its δ and unit."""
    budget = service.put_budget(
        session, dataset=dataset, body=body, known=_known(settings), settings=settings
    )
    session.commit()  # committed before the answer: the next admission sees the budget
    return budget


def _known(settings: Settings) -> list[str]:
    """Returns the datasets a budget may be set on: the registered ones and the uploads."""
    return sorted({*registered_datasets(), *(u.name for u in list_uploads(settings))})


# An empty dataset segment (`/api/budgets/`) is a missing field; `/api/budgets` itself takes GET
# only, and a write to it is a 405 naming what it allows (backend.middleware.Methods).
@router.put("/", include_in_schema=False, dependencies=[WriteGuard])
@router.delete("/", include_in_schema=False, dependencies=[WriteGuard])
def no_dataset(settings: SettingsDep) -> None:
    """Refuses a budget write without a dataset name (422 naming `dataset`)."""
    raise ParameterError(
        "path",
        "dataset",
        f"is missing: write to /api/budgets/{{dataset}}, one of {', '.join(_known(settings))}.",
    )


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

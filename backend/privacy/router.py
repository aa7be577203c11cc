"""HTTP for privacy projections."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from backend.deps import SessionDep, SettingsDep
from backend.privacy import service
from backend.privacy.schemas import ProjectionRead
from dpfl.spec import parse_spec

router = APIRouter(prefix="/privacy", tags=["privacy"])


@router.post(
    "/project",
    response_model=ProjectionRead,
    responses={422: {"description": "a field of the spec is invalid; `detail[].loc` names it"}},
)
def project(
    session: SessionDep,
    settings: SettingsDep,
    spec: Annotated[dict[str, Any], Body(description="a RunSpec")],
) -> Any:
    """A spec's noise multiplier and projected ε per round, without running it."""
    return service.project(session, spec=parse_spec(spec), settings=settings)

"""HTTP for privacy projections."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.deps import SessionDep, SettingsDep, SpecBody, WriteGuard
from backend.privacy import service
from backend.privacy.schemas import ProjectionRead
from dpfl.spec import parse_spec

router = APIRouter(prefix="/privacy", tags=["privacy"])


@router.post(
    "/project",
    response_model=ProjectionRead,
    responses={
        422: {
            "description": "a field of the spec is invalid, or beyond what the server projects in "
            "bounded time and memory; `detail[].loc` names it"
        },
        503: {"description": "the server is shutting down, or its projection process died; try again"},
    },
    # A projection can take seconds of CPU: guarded like a write, so an open server is not a free worker.
    dependencies=[WriteGuard],
)
def project(
    session: SessionDep,
    settings: SettingsDep,
    spec: SpecBody,
) -> Any:
    """A spec's noise multiplier and projected ε per round, without running it."""
    return service.project(session, spec=parse_spec(spec), settings=settings)

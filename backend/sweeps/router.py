"""HTTP for sweeps: submit a grid, list, read, annotate, delete, and the per-(algorithm, ε) summary."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from backend.deps import MAX_OFFSET, SessionDep, SettingsDep, WriteGuard
from backend.dispatch import send
from backend.runs import pages
from backend.runs.listing import Archived
from backend.sweeps import edits, preview, service
from backend.sweeps.export import summary_csv
from backend.sweeps.schemas import (
    SweepCreate,
    SweepCreated,
    SweepDetail,
    SweepPage,
    SweepPatch,
    SweepPreview,
    SweepRead,
    SweepSummary,
)
from dpfl.sweep import PointError

router = APIRouter(prefix="/sweeps", tags=["sweeps"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "no sweep with this id"},
    409: {"description": "the sweep's runs would overspend a dataset's privacy budget; nothing was created"},
    422: {"description": "a field of the base or the grid is invalid; `detail[].loc` names it"},
}


@router.post("", status_code=201, response_model=SweepCreated, responses=ERRORS, dependencies=[WriteGuard])
def create_sweep(request: Request, session: SessionDep, settings: SettingsDep, body: SweepCreate) -> Any:
    """Expand the grid over the base spec, admit every point against its budget, and queue the runs."""
    try:
        sweep, runs = service.create_sweep(
            session, name=body.name, base=body.base, grid=body.grid, settings=settings
        )
    except PointError as exc:
        session.rollback()
        return _point_refused(exc)
    session.commit()  # the workers must find the rows before the messages
    # a broker that is down leaves the runs queued; the dispatcher sends them when it is back
    send(request.app.state.database, request.app.state.celery, [run.id for run in runs])
    return service.created(sweep, runs)


@router.post(
    "/preview",
    response_model=SweepPreview,
    responses={422: ERRORS[422]},
)
def preview_sweep(session: SessionDep, settings: SettingsDep, body: SweepCreate) -> Any:
    """What submitting this sweep would queue: its runs, their worker tasks and an estimated time.
    Nothing is written; the points are checked as on submit, without their data."""
    try:
        return preview.preview(session, base=body.base, grid=body.grid, settings=settings)
    except PointError as exc:
        return _point_refused(exc)


@router.get("", response_model=SweepPage)
def list_sweeps(
    session: SessionDep,
    q: Annotated[
        str | None,
        Query(
            max_length=200, description="text search, case-insensitive, in name and tags, or the id's start"
        ),
    ] = None,
    archived: Annotated[
        Archived, Query(description="false (default): hide archived sweeps; true: only archived; all")
    ] = Archived.false,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    """List sweeps, newest first, with how many of their runs are in each status."""
    items, total = service.list_sweeps(session, q=q, archived=archived, limit=limit, offset=offset)
    next_offset = offset + limit if offset + limit < total else None
    return SweepPage(items=items, total=total, offset=offset, limit=limit, next_offset=next_offset)


@router.get("/{sweep_id}", response_model=SweepDetail, responses=ERRORS)
def get_sweep(sweep_id: str, session: SessionDep) -> Any:
    """The sweep, its grid, its runs, their status counts and mean progress."""
    return service.detail(session, sweep_id)


@router.patch(
    "/{sweep_id}",
    response_model=SweepRead,
    responses={404: ERRORS[404], 422: {"description": "a field is invalid; `detail[].loc` names it"}},
    dependencies=[WriteGuard],
)
def patch_sweep(sweep_id: str, body: SweepPatch, session: SessionDep) -> Any:
    """Set any of the sweep's `name`, `tags`, `notes` and `archived`; fields not sent stay as they are."""
    edits.patch_sweep(session, sweep_id, changes=body.changes())
    session.commit()
    return service.describe(session, [service.get_sweep(session, sweep_id)])[0]


@router.delete(
    "/{sweep_id}",
    status_code=204,
    dependencies=[WriteGuard],
    responses={
        404: ERRORS[404],
        409: {"description": "a run of the sweep is queued or running, or spent ε of a privacy budget"},
    },
)
def delete_sweep(sweep_id: str, session: SessionDep) -> Response:
    """Delete the sweep and its runs, all finished, with their metrics and ledgers."""
    edits.delete_sweep(session, sweep_id)
    session.commit()
    return Response(status_code=204)


@router.get("/{sweep_id}/summary", response_model=SweepSummary, responses=ERRORS)
async def get_summary(sweep_id: str, request: Request) -> Response:
    """Accuracy and ε spent per (algorithm, ε) over the succeeded runs, the Pareto front, the reference.

    Served from the page cache (backend/runs/pages.py): cleared by any write through the API,
    and at most about a second behind the runs workers finish.
    """
    database, cache = request.app.state.database, request.app.state.run_pages

    def page() -> bytes:
        with database.session() as session:
            return service.summary(session, sweep_id).model_dump_json().encode()

    body = await cache.get(pages.key(request.scope), lambda: run_in_threadpool(page))
    return Response(body, media_type="application/json")


@router.get(
    "/{sweep_id}/summary.csv",
    response_class=Response,
    responses={**ERRORS, 200: {"content": {"text/csv": {}}, "description": "one line per (algorithm, ε)"}},
)
def get_summary_csv(sweep_id: str, session: SessionDep) -> Response:
    """The summary rows as CSV."""
    rows = service.summary(session, sweep_id).rows
    return Response(
        summary_csv(row.model_dump() for row in rows),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="sweep-{sweep_id}-summary.csv"'},
    )


def _point_refused(exc: PointError) -> JSONResponse:
    # loc keeps a dotted grid key whole (["body", "grid", "privacy.epsilon"]), as FastAPI does for keys
    error = {"loc": ["body", *exc.loc], "msg": exc.reason, "type": "value_error"}
    return JSONResponse({"detail": [error], "error": "SpecError"}, status_code=422)

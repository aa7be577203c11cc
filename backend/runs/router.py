"""HTTP for runs: submit, list, export as CSV, read, annotate, cancel, delete, metrics, ledger, spec."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from backend.deps import MAX_OFFSET, SessionDep, SettingsDep, WriteGuard
from backend.dispatch import send
from backend.models import Run
from backend.runs import ingest, listing, pages, service
from backend.runs.filters import MAX_FILTER_CHARS
from backend.runs.idempotency import created_once
from backend.runs.listing import SORTS, Archived, RunQuery
from backend.runs.schemas import LedgerRead, MetricRead, RunDetail, RunPage, RunPatch, RunRead
from dpfl.formats import cell_text
from dpfl.spec import parse_spec

router = APIRouter(prefix="/runs", tags=["runs"])

# A RunSpec (run by this server), or an ExternalRun (`source: external`, logged from elsewhere);
# read as a JSON object so that a bad field is our 422 naming it (`backend.openapi` adds both schemas).
RunBody = Annotated[
    dict[str, Any],
    Body(
        description="a RunSpec, or an ExternalRun (`source: external`)",
        json_schema_extra={
            "anyOf": [{"$ref": "#/components/schemas/RunSpec"}, {"$ref": "#/components/schemas/ExternalRun"}]
        },
    ),
]

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "no run with this id"},
    409: {"description": "the run's state or the privacy budget does not allow it"},
    422: {"description": "a field of the spec is invalid; `detail[].loc` names it"},
}

CSV_COLUMNS = (
    "id",
    "name",
    "tags",
    "status",
    "algorithm",
    "dataset",
    "sweep_id",
    "sweep_name",
    "notion",
    "target_epsilon",
    "epsilon",
    "delta",
    "accountant",
    "noise_multiplier",
    "final_accuracy",
    "best_accuracy",
    "final_balanced_accuracy",
    "final_loss",
    "rounds",
    "seed",
    "duration_s",
    "created_at",
)


@router.post("", status_code=201, response_model=RunRead, responses=ERRORS, dependencies=[WriteGuard])
def create_run(
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
    spec: RunBody,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="any unique string: a retried POST with the same key and spec answers with "
            "the run the first created (header `Idempotent-Replayed: true`) and creates no other",
        ),
    ] = None,
) -> Any:
    """Validate a run spec, reserve its projected ε against the dataset budget, and queue it.

    201 means the run is admitted and will run: if the broker cannot be reached now, the run
    stays queued and its message is sent when the broker is back (`dispatch_timeout_s`).
    A body with `source: external` describes a run executed elsewhere: it is added, running,
    and never queued (`backend.runs.ingest`)."""
    if spec.get("source") == "external":
        return ingest.create(response, session, settings, spec, idempotency_key)
    parsed = parse_spec(spec)
    run, new = created_once(
        response,
        session,
        find=lambda: None if idempotency_key is None else service.keyed_run(session, idempotency_key, parsed),
        create=lambda: service.create_run(
            session, spec=parsed, settings=settings, idempotency_key=idempotency_key
        ),
    )
    if new:
        send(request.app.state.database, request.app.state.celery, [run.id])
    return run


@dataclass
class RunFilters:
    """The filters and order GET /runs and GET /runs.csv share (query parameters)."""

    status: str | None = None
    algorithm: str | None = None
    dataset: str | None = None
    sweep: Annotated[str | None, Query(description="a sweep id: only its runs")] = None
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="text search, case-insensitive, in name, tags, algorithm and dataset, "
            "or the start of the run id",
        ),
    ] = None
    tag: Annotated[
        list[str] | None, Query(description="only runs with this tag (repeat: with all of them)")
    ] = None
    archived: Annotated[
        Archived, Query(description="false (default): hide archived runs; true: only archived; all")
    ] = Archived.false
    filter: Annotated[
        str | None,
        Query(
            max_length=MAX_FILTER_CHARS,
            description="clauses `field op value` joined by `and`, e.g. `epsilon <= 2 and params.clip = 1 "
            "and accuracy > 0.8`; fields: the list's columns or spec paths (params.lr, dataset.silos)",
        ),
    ] = None
    sort: Annotated[
        str,
        Query(
            description=f"one of {', '.join(sorted(SORTS))}; prefix - for descending",
            # in the schema as the enum it is; checked by `RunQuery.order`, whose 422 lists them
            json_schema_extra={"enum": sorted([*SORTS, *(f"-{key}" for key in SORTS)])},
        ),
    ] = "-created_at"

    def query(self) -> RunQuery:
        return RunQuery(
            status=self.status,
            algorithm=self.algorithm,
            dataset=self.dataset,
            sweep_id=self.sweep,
            q=self.q,
            tags=self.tag or [],
            archived=self.archived,
            sort=self.sort,
            filter=self.filter,
        )


FiltersDep = Annotated[RunFilters, Depends()]


@router.get("", response_model=RunPage, responses={422: ERRORS[422]})
async def list_runs(
    request: Request,
    filters: FiltersDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Response:
    """List runs, filtered, searched (`q`) and sorted (`sort=-epsilon`), one page at a time."""
    database, cache = request.app.state.database, request.app.state.run_pages
    query = filters.query()

    def page() -> bytes:
        with database.session() as session:
            rows, total = listing.list_runs(session, query, limit=limit, offset=offset)
            next_offset = offset + limit if offset + limit < total else None
            return (
                RunPage(items=rows, total=total, offset=offset, limit=limit, next_offset=next_offset)
                .model_dump_json()
                .encode()
            )

    # keyed as backend.runs.pages.RunPages looks pages up before routing
    body = await cache.get(pages.key(request.scope), lambda: run_in_threadpool(page))
    return Response(body, media_type="application/json")


# ".csv" joins the prefix as /runs.csv, a path of its own: /runs/{run_id} needs the slash
@router.get(
    ".csv",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/csv": {}},
            "description": "one line per matching run: "
            + ", ".join(CSV_COLUMNS)
            + ", then params.<key> for every param key of the runs (blank where a run has none)",
        },
        422: ERRORS[422],
    },
)
def export_runs(request: Request, filters: FiltersDep) -> StreamingResponse:
    """Every run matching the filters of GET /runs, as CSV, streamed (X-Total-Count: how many)."""
    database = request.app.state.database
    query = filters.query()
    query.order()  # a bad sort is refused (422) before the answer starts
    with database.session() as session:
        total = listing.count_runs(session, query)
        keys = listing.param_keys(session, query)

    def lines() -> Iterator[str]:
        with database.session() as session:
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow([*CSV_COLUMNS, *(f"params.{k}" for k in keys)])
            for i, run in enumerate(listing.stream_runs(session, query), start=1):
                params = run.params if isinstance(run.params, dict) else {}
                writer.writerow([*_csv_cells(run), *(_param_cell(params.get(k)) for k in keys)])
                if i % 500 == 0:
                    yield out.getvalue()
                    out.seek(0)
                    out.truncate()
            yield out.getvalue()

    return StreamingResponse(
        lines(),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="runs.csv"', "X-Total-Count": str(total)},
    )


def _csv_cells(run: Run) -> list[Any]:
    cells = {c: getattr(run, c) for c in CSV_COLUMNS}
    created = run.created_at
    cells["created_at"] = (created if created.tzinfo else created.replace(tzinfo=dt.UTC)).isoformat()
    cells["tags"] = ",".join(run.tags)  # tags hold no commas (backend/runs/schemas.py)
    if isinstance(run.noise_multiplier, list | dict):  # σ per silo
        cells["noise_multiplier"] = json.dumps(run.noise_multiplier)
    return [cell_text(v) for v in cells.values()]


def _param_cell(value: Any) -> Any:
    """A param's CSV cell: numbers and words as written, lists and mappings as JSON, blank for none."""
    if value is None:
        return ""
    return cell_text(json.dumps(value) if isinstance(value, list | dict) else value)


@router.get("/{run_id}", response_model=RunDetail, responses=ERRORS)
def get_run(run_id: str, session: SessionDep) -> Any:
    """One run's status, progress and outcome."""
    return service.get_run(session, run_id)


@router.patch(
    "/{run_id}",
    response_model=RunDetail,
    responses={404: ERRORS[404], 422: {"description": "a field is invalid; `detail[].loc` names it"}},
    dependencies=[WriteGuard],
)
def patch_run(run_id: str, body: RunPatch, session: SessionDep) -> Any:
    """Set any of the run's `name`, `tags`, `notes` and `archived`; fields not sent stay as they are."""
    run = service.patch_run(session, run_id, changes=body.changes())
    session.commit()  # committed before the answer: the list read next shows the change
    return run


@router.post("/{run_id}/cancel", response_model=RunRead, responses=ERRORS, dependencies=[WriteGuard])
def cancel_run(run_id: str, session: SessionDep) -> Any:
    """Cancel a queued run now, or ask a running one to stop after its current round."""
    run = service.cancel_run(session, run_id)
    session.commit()  # committed before the answer: a client that reads next sees it
    return run


@router.delete("/{run_id}", status_code=204, responses=ERRORS, dependencies=[WriteGuard])
def delete_run(run_id: str, session: SessionDep) -> Response:
    """Delete a finished run with its metrics and ledger."""
    service.delete_run(session, run_id)
    session.commit()
    return Response(status_code=204)


@router.get("/{run_id}/metrics", response_model=list[MetricRead], responses=ERRORS)
def get_metrics(run_id: str, session: SessionDep) -> Any:
    """Accuracy, loss and ε of each evaluated round."""
    return service.metrics(session, run_id)


@router.get("/{run_id}/ledger", response_model=LedgerRead, responses=ERRORS)
def get_ledger(
    run_id: str,
    session: SessionDep,
    accountant: str | None = None,
    delta: Annotated[float | None, Query(gt=0, lt=1)] = None,
) -> Any:
    """The run's releases and its ε per party per round, recomputed by any accountant."""
    return service.ledger(session, run_id, accountant=accountant, delta=delta)


@router.get("/{run_id}/spec", responses=ERRORS)
def get_spec(run_id: str, session: SessionDep) -> dict[str, Any]:
    """The resolved spec the run was submitted with."""
    return service.get_run(session, run_id).spec

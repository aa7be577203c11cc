"""HTTP for the event stream."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from backend.deps import DatabaseDep
from backend.events import service
from backend.events.stream import run_events

router = APIRouter(prefix="/events", tags=["events"])

ERRORS = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "without `since` and `run`: one `snapshot` event ({columns, runs: [[values]]}, "
        "the active runs or the sweep's runs), then `run` events, one per change of a run",
    },
    404: {"description": "no run or sweep with this id"},
    422: {"description": "`since` or `Last-Event-ID` is not an ISO 8601 timestamp"},
}


# what `service.parse_since` takes, for the OpenAPI schema: a timestamp, or "" for none
TIMESTAMP: dict[str, Any] = {
    "json_schema_extra": {"type": "string", "anyOf": [{"format": "date-time"}, {"const": ""}]}
}


@router.get("", response_class=StreamingResponse, responses=ERRORS)
async def stream_events(
    request: Request,
    database: DatabaseDep,
    run: str | None = None,
    sweep: str | None = None,
    since: Annotated[str | None, Query(description="ISO 8601: resume after this time", **TIMESTAMP)] = None,
    timeout: Annotated[float | None, Query(gt=0, le=86_400, description="close after seconds")] = None,
    last_event_id: Annotated[str | None, Header(**TIMESTAMP)] = None,
) -> StreamingResponse:
    """Server-Sent Events of run status and progress, optionally for one run or one sweep.

    A new stream for all runs or one sweep starts with one compact `snapshot` event (column
    names once, one list of values per run), shared by the streams that start within a second;
    one for a single run, or resuming with `since`/`Last-Event-ID`, starts with `run` events.
    """
    # both checked, the header winning: a bad `since` is refused even when the header is sent
    after = service.parse_since(since)
    start = service.parse_since(last_event_id, field="Last-Event-ID", location="header") or after

    def watcher() -> service.RunWatcher:
        with database.session() as session:
            return service.open_watcher(session, run_id=run, sweep_id=sweep, since=start)

    snapshots = request.app.state.event_snapshots if start is None and run is None else None
    return StreamingResponse(
        run_events(
            request, database, await run_in_threadpool(watcher), timeout_s=timeout, snapshots=snapshots
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )

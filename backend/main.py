"""The FastAPI application: `backend.main:app`, or `create_app(settings)` in tests.

It refuses to start on a database that is not at the newest migration, and says which
command fixes that. While it serves, background tasks re-queue runs whose worker died (and fail
audits whose worker died), and send again the messages of queued runs and audits that the
broker lost or never got (backend.dispatch).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from backend import assets, dispatch, errors, migrate
from backend.api import api
from backend.audits import service as audits
from backend.db import Database
from backend.events.stream import SharedSnapshots
from backend.middleware import BodyLimit, Methods
from backend.openapi import complete_schema
from backend.privacy import bounded
from backend.queue import make_celery
from backend.runs import service as runs
from backend.runs.pages import PageCache, RunPages
from backend.settings import Settings, get_settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)
FRONTEND = Path(__file__).resolve().parents[1] / "frontend"


class NotMigrated(RuntimeError):
    pass


def check_migrated(database: Database) -> None:
    """Raises NotMigrated with the command to run when the schema is not at the head revision."""
    current, head = migrate.current_revision(database.engine), migrate.head_revision()
    if current != head:
        raise NotMigrated(
            f"the database at {database.engine.url.render_as_string(hide_password=True)} is at revision "
            f"{current or 'none'}, not {head}; run `dpfl db upgrade` (dpfl up does it for you)"
        )


def _reap(app: FastAPI) -> None:
    with app.state.database.session() as session:
        again = runs.requeue_stale(session, settings=app.state.settings)
        lost = audits.fail_lost(session, settings=app.state.settings)
    for run_id in again:
        log.warning("%s: worker stopped sending heartbeats; re-queued", run_id)
    for audit_id in lost:
        log.warning("audit %s: its worker stopped; failed", audit_id)
    dispatch.send(app.state.database, app.state.celery, again)


async def _reaper(app: FastAPI, every_s: float) -> None:
    # Off the event loop, like the dispatcher: its writes may wait for SQLite's lock (up to the
    # busy timeout), and every request, static files included, would wait with them.
    while True:
        await asyncio.sleep(every_s)
        try:
            await asyncio.to_thread(_reap, app)
        except Exception:  # the reaper must outlive a passing database error
            log.exception("re-queueing stale runs failed")


def _streams_own_body(scope) -> bool:
    """The CSV upload reads its body as a stream, under `max_upload_bytes`."""
    return scope["method"] == "POST" and scope["path"].rstrip("/") == "/api/datasets"


async def _dispatcher(app: FastAPI, every_s: float) -> None:
    # Sends the messages of queued runs that have none (backend.dispatch), off the event loop:
    # a broker that is down makes each pass wait for its connection timeout.
    state = app.state
    while True:
        await asyncio.sleep(every_s)
        try:
            await asyncio.to_thread(dispatch.dispatch, state.database, state.celery, state.settings)
            await asyncio.to_thread(dispatch.dispatch_audits, state.database, state.celery, state.settings)
        except Exception:  # the dispatcher must outlive a passing database error
            log.exception("dispatching queued runs failed")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Returns the app for `settings` (default: the environment's)."""
    settings = settings or get_settings()
    database = Database(settings.database_url, sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s)
    check_migrated(database)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(_reaper(app, max(settings.heartbeat_timeout_s / 4, 0.5))),
            asyncio.create_task(_dispatcher(app, max(settings.dispatch_timeout_s / 4, 0.5))),
        ]
        bounded.install_stop_on_sigterm()  # after uvicorn's handlers, so it runs before them
        if settings.projection_timeout_s > 0:  # warm before the first request, not during it
            await asyncio.to_thread(
                bounded.start,
                processes=settings.projection_processes,
                memory_bytes=settings.projection_memory_mb * 2**20,
            )
        yield
        for task in tasks:
            task.cancel()
        bounded.shutdown()
        database.engine.dispose()  # close the pool's connections now, not when it is collected

    app = FastAPI(
        title="DP-FL Explorer",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # /docs is served from local assets (backend.assets); ReDoc needs a CDN
        redoc_url=None,
        description="Differentially private federated learning runs, their ε ledgers and budgets.",
    )
    app.state.settings = settings
    app.state.database = database
    app.state.celery = make_celery(settings)
    app.state.run_pages = PageCache()
    app.state.event_snapshots = SharedSnapshots(database)
    app.add_middleware(RunPages, cache=app.state.run_pages)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, exempt=_streams_own_body)
    complete_schema(app)
    app.add_middleware(Methods, openapi=app.openapi)
    errors.install(app)
    app.include_router(api)
    # The browser app: no build step; Plotly and Swagger UI come from installed packages so the
    # dashboard works offline.
    assets.install(app)
    app.mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
    return app


def __getattr__(name: str):  # `backend.main:app` builds the app only when uvicorn asks for it
    if name == "app":
        return create_app()
    raise AttributeError(name)

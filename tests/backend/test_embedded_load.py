"""The embedded stack (SQLite and the filesystem broker, `make up`'s default) under load: the event
loop never waits for the database, and a write that cannot get SQLite's lock in time is a 503
with Retry-After, never a 500."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from backend import migrate
from backend.db import Database
from backend.main import create_app
from backend.models import Run
from tests.backend.conftest import make_settings
from tests.backend.served import at_once, serve
from tests.factories import service_spec

pytestmark = pytest.mark.service

CLIENTS = 50


@contextlib.contextmanager
def write_locked(path) -> Iterator[None]:
    """Holds SQLite's write lock (another process's long write: a large submission)."""
    other = sqlite3.connect(str(path), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE runs SET updated_at = updated_at WHERE id = 'none'")
    try:
        yield
    finally:
        other.execute("COMMIT")
        other.close()


@pytest.fixture
def embedded(tmp_path):
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    return make_settings(tmp_path, url)


def test_a_write_that_cannot_get_the_lock_in_time_is_a_503_with_retry_after(embedded, tmp_path):
    settings = embedded.model_copy(update={"sqlite_busy_timeout_s": 0.5})
    with TestClient(create_app(settings)) as client:
        with write_locked(tmp_path / "dpfl.db"):
            res = client.post("/api/runs", json=service_spec(rounds=1))
            assert client.get("/api/runs").status_code == 200  # reads go on (WAL)
        assert res.status_code == 503, res.text
        assert res.headers["retry-after"] == "1"
        assert res.json() == {
            "detail": "the database is busy with another write (SQLite allows one at a time); "
            "nothing was saved: send the request again",
            "error": "Busy",
        }
        assert client.get("/api/runs").json()["total"] == 0  # nothing half-saved
        assert client.post("/api/runs", json=service_spec(rounds=1)).status_code == 201  # once it is free


def test_the_reaper_waiting_for_the_lock_does_not_stall_other_requests(embedded, tmp_path):
    """The reaper's writes ran on the event loop: while they waited for SQLite's lock (up to its
    busy timeout), no request was answered, a static file included (30.8 s under 50 clients)."""
    settings = embedded.model_copy(update={"heartbeat_timeout_s": 1.0, "sqlite_busy_timeout_s": 120.0})
    with TestClient(create_app(settings)) as client:
        run_id = client.post("/api/runs", json=service_spec(rounds=1)).json()["id"]
    database = Database(settings.database_url)
    with database.session() as session:  # a run whose worker died: the reaper will write to it
        session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(status="running", heartbeat_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
        )
    database.engine.dispose()
    with serve(create_app(settings)) as base, write_locked(tmp_path / "dpfl.db"):
        time.sleep(1.5)  # the reaper (every 0.5 s here) is now waiting for the lock
        with httpx.Client(base_url=base, timeout=60) as http:
            assert http.get("/index.html").status_code == 200  # answered while the lock is held
            assert http.get("/api/health").status_code == 200


@pytest.mark.slow
def test_fifty_clients_submitting_at_once_get_no_500(embedded):
    # as `dpfl up` serves: projections in their processes (so requests overlap), the reaper at work
    settings = embedded.model_copy(update={"heartbeat_timeout_s": 2.0, "projection_timeout_s": 60.0})
    spec = service_spec(rounds=1)

    def client(http: httpx.Client) -> list[httpx.Response]:
        return [r for _ in range(6) for r in (http.post("/api/runs", json=spec), http.get("/index.html"))]

    with serve(create_app(settings)) as base:
        answers = at_once(base, CLIENTS, client)
    errors = [a for a in answers if a.status_code >= 500 and a.status_code != 503]
    assert not errors, [e.text[:200] for e in errors[:3]]
    assert all(a.headers["retry-after"] == "1" for a in answers if a.status_code == 503)
    assert {a.status_code for a in answers} <= {200, 201, 503}
    assert sum(a.status_code == 201 for a in answers) >= CLIENTS  # most writes get through

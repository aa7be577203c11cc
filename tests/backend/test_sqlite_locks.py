"""Embedded SQLite: a running run outlives a long write transaction of another process (a slow
submission) without losing a round, and a sweep's projections run before its transaction."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from backend.settings import Settings
from tests.backend.conftest import WorkerProcess, make_settings, wait_for
from tests.factories import service_spec

pytestmark = pytest.mark.service

LOCK_S = 6.0


@pytest.fixture
def sqlite_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFL_SQLITE_BUSY_TIMEOUT_S", "1")  # the worker's, so the lock outlasts it
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    return make_settings(tmp_path, url, sqlite_busy_timeout_s=1.0)


@pytest.mark.slow
def test_a_running_run_survives_a_long_write_transaction(sqlite_settings, tmp_path):
    spec = service_spec(rounds=150, eval_every=1, privacy={"noise_multiplier": 1.5, "delta": 1e-5})
    worker = WorkerProcess(sqlite_settings, tmp_path / "worker.log")
    # Only the worker waits a short second for the lock: the API keeps its default wait. With
    # both at 1 s, a `make test` run once saw the API's first connection refused while the new
    # worker's first writes held the lock ("database is locked" in `create_app`).
    default = Settings.model_fields["sqlite_busy_timeout_s"].default  # not the patched environment's
    api = sqlite_settings.model_copy(update={"sqlite_busy_timeout_s": default})
    try:
        with TestClient(create_app(api)) as client:
            run_id = client.post("/api/runs", json=spec).json()["id"]
            deadline = time.time() + 60
            while client.get(f"/api/runs/{run_id}").json()["current_round"] < 3 and time.time() < deadline:
                time.sleep(0.1)
            # another writer (a slow submission) holds the write lock for 6 × the busy timeout
            other = sqlite3.connect(str(tmp_path / "dpfl.db"), isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            other.execute("UPDATE runs SET updated_at = updated_at WHERE id = 'none'")
            time.sleep(LOCK_S)
            other.execute("COMMIT")
            other.close()
            body = wait_for(client, run_id, {"succeeded", "failed"}, timeout=180)
            metrics = client.get(f"/api/runs/{run_id}/metrics").json()
    finally:
        worker.stop()
    assert body["status"] == "succeeded", body["error"]
    assert body["attempts"] == 1  # not re-queued: no round was redone
    assert [m["round"] for m in metrics] == list(range(1, 151))
    assert "locked" in (tmp_path / "worker.log").read_text()  # it did meet the lock, and waited


def test_a_sweep_projects_its_points_before_it_takes_the_write_lock(sqlite_settings, tmp_path):
    # every point needs its own plan accounted (its own σ, not an ε target): nothing is shared
    base = service_spec(rounds=1000, privacy={"noise_multiplier": 1.5, "delta": 1e-5})
    grid = {"privacy.noise_multiplier": [round(1.5 + 0.01 * i, 2) for i in range(24)]}
    waits: list[float] = []
    with TestClient(create_app(sqlite_settings)) as client:
        done = threading.Event()
        answer: list = []

        def submit() -> None:
            answer.append(client.post("/api/sweeps", json={"name": "slow", "base": base, "grid": grid}))
            done.set()

        started = time.monotonic()
        threading.Thread(target=submit).start()
        other = sqlite3.connect(str(tmp_path / "dpfl.db"), isolation_level=None, timeout=30)
        while not done.is_set():  # another writer, as a worker recording rounds
            t = time.monotonic()
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
            waits.append(time.monotonic() - t)
            time.sleep(0.02)
        other.close()
        took = time.monotonic() - started
    assert answer[0].status_code == 201, answer[0].text
    assert took > 1.0, took  # long enough to matter
    assert max(waits) < 0.5, (max(waits), took)

"""GET /api/sweeps/{id}/summary is served from the page cache: fresh after a write through the
API at once, and after a change a worker makes in the database within the cache's lifetime."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update

from backend.db import Database
from backend.models import Run, RunStatus
from tests.backend.sweeps.test_router import NO_RUNS, submit

pytestmark = pytest.mark.service

BASE = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 3,
    "privacy": {"delta": 1e-5},
}
# σ targets, one given as an int: the summary reads them out of the stored spec's JSON
GRID = {"privacy.noise_multiplier": [1.5, 2], "seed": [0, 1]}


def summary(client, sweep_id: str) -> dict:
    res = client.get(f"/api/sweeps/{sweep_id}/summary")
    assert res.status_code == 200
    assert res.headers["content-type"] == "application/json"
    return res.json()


def test_a_write_through_the_api_refreshes_the_summary_at_once(client):
    sweep = submit(client, base=BASE, grid=GRID).json()
    assert summary(client, sweep["id"])["counts"] == NO_RUNS | {"queued": 4}
    assert client.post(f"/api/runs/{sweep['run_ids'][0]}/cancel").status_code == 200
    assert summary(client, sweep["id"])["counts"] == NO_RUNS | {"queued": 3, "cancelled": 1}
    # an unknown sweep is never cached, before or after one is created
    assert client.get("/api/sweeps/nope/summary").status_code == 404
    assert client.get("/api/sweeps/nope/summary").json()["error"] == "NotFound"


def test_a_run_a_worker_finishes_shows_within_the_cache_lifetime(client, settings):
    sweep = submit(client, base=BASE, grid=GRID).json()
    before = summary(client, sweep["id"])
    assert (before["counts"], before["rows"]) == (NO_RUNS | {"queued": 4}, [])
    database = Database(settings.database_url)
    try:
        with database.session() as session:  # as a worker would: no request to this API process
            for run_id, accuracy in zip(sweep["run_ids"], (0.8, 0.9, 0.7, 0.6), strict=True):
                session.execute(
                    update(Run)
                    .where(Run.id == run_id)
                    .values(status=RunStatus.succeeded, final_accuracy=accuracy, epsilon=2.0, progress=1.0)
                )
    finally:
        database.engine.dispose()
    assert summary(client, sweep["id"]) == before  # served from the cache (rebuilt behind it)
    deadline, after = time.monotonic() + 15, before
    while after == before and time.monotonic() < deadline:
        time.sleep(0.2)
        after = summary(client, sweep["id"])
    assert after["counts"] == NO_RUNS | {"succeeded": 4}
    assert [(r["noise_multiplier"], r["n"], r["accuracy_mean"]) for r in after["rows"]] == [
        (1.5, 2, pytest.approx(0.85)),
        (2.0, 2, pytest.approx(0.65)),
    ]
    assert [p["epsilon"] for p in after["pareto"]] == [2.0]

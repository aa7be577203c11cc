"""Workers are listed while they run runs, and while they wait for one (both transports)."""

from __future__ import annotations

import time

import pytest

from tests.backend.conftest import wait_for
from tests.factories import service_spec

pytestmark = pytest.mark.service


def test_a_worker_running_a_run_is_listed(client, worker):
    spec = service_spec(rounds=300, eval_every=1, privacy={"noise_multiplier": 1.5, "delta": 1e-5})
    run_id = client.post("/api/runs", json=spec).json()["id"]
    deadline = time.time() + 60
    while (body := client.get(f"/api/runs/{run_id}").json())["current_round"] < 2 and time.time() < deadline:
        time.sleep(0.1)
    assert body["status"] == "running"
    health = client.get("/api/health").json()
    assert health["workers"] == [body["worker"]]
    client.post(f"/api/runs/{run_id}/cancel")
    wait_for(client, run_id, {"cancelled", "succeeded", "failed"})


def test_an_idle_worker_is_listed(client, worker):
    deadline = time.time() + 15
    while not (workers := client.get("/api/health").json()["workers"]) and time.time() < deadline:
        time.sleep(0.2)
    assert len(workers) == 1 and workers[0].startswith("w1@")

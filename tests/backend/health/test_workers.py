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


def test_the_worker_logs_a_non_converging_rdp_order_once_per_run(client, worker):
    # q ≈ 0.18 at σ ≤ 1: dp-accounting gives up on the orders 1.25..1.7 of every composed event
    # (14 warnings in 2 rounds run locally); σ differs so that no accountant cache hides the second
    ids = [
        client.post(
            "/api/runs", json=service_spec(rounds=2, privacy={"noise_multiplier": sigma, "delta": 1e-5})
        ).json()["id"]
        for sigma in (1.0, 0.9)
    ]
    bodies = [wait_for(client, run_id, {"succeeded", "failed"}) for run_id in ids]
    assert [b["status"] for b in bodies] == ["succeeded"] * 2, [b["error"] for b in bodies]
    lines = [line for line in worker.log.read_text().splitlines() if "failed to converge" in line]
    assert [sum(f"] {run_id}: " in line for line in lines) for run_id in ids] == [1, 1], lines
    assert len(lines) == 2 and all("logged once per run" in line for line in lines)

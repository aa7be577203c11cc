"""Runs you can see and stop (issue 38): a claimed run is `preparing` with what it does, and Cancel
takes effect within seconds in every phase, not only between rounds."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.backend.conftest import wait_for, wait_until
from tests.server import dpfl_up

pytestmark = pytest.mark.service


def cancelled_within(client, run_id: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    assert client.post(f"/api/runs/{run_id}/cancel").json()["cancel_requested"] is True
    body = wait_for(client, run_id, {"cancelled", "succeeded", "failed"}, timeout=60)
    return body, time.monotonic() - t0


@pytest.mark.parametrize("settings", ["postgres"], indirect=True)
def test_cancel_stops_a_run_calibrating_its_noise_within_seconds(client, worker):
    # a protected run calibrates σ on its own secret draws: ULDP-GROUP-32's group-privacy
    # curves take about 10 s (group_size 500 took minutes, and Cancel waited for all of it)
    client.put("/api/budgets/digits", json={"total_epsilon": 100.0})
    spec = {
        "algorithm": "uldp_group",
        "params": {"group_size": 32},
        "dataset": {"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 100}},
        "model": {"name": "logreg"},
        "rounds": 2,
        "privacy": {"epsilon": 3.0},
    }
    res = client.post("/api/runs", json=spec)
    assert res.status_code == 201, res.text
    run_id = res.json()["id"]
    seen = wait_until(
        client, run_id, lambda b: b["phase"] == "calibrating σ" or b["status"] == "running", every=0.1
    )
    assert (seen["status"], seen["phase"]) == ("preparing", "calibrating σ")
    body, took = cancelled_within(client, run_id)
    assert body["status"] == "cancelled" and took < 5.0, (body, took)
    assert (body["current_round"], body["phase"], body["epsilon"]) == (0, None, 0.0)
    (charge,) = client.get("/api/budgets/digits").json()["charges"]
    assert charge == {"run_id": run_id, "reserved": 3.0, "spent": 0.0, "settled": True}


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
def test_cancel_stops_a_round_of_the_weighting_protocol_within_seconds(client, worker):
    # ULDP-AVG-w's Paillier protocol: one round of 30 users on 4 silos takes about 45 s
    client.put("/api/budgets/digits", json={"total_epsilon": 100.0})
    spec = {
        "algorithm": "uldp_avg_w",
        "params": {"secure_weighting": True},
        "dataset": {"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 30}},
        "model": {"name": "logreg"},
        "rounds": 2,
        "privacy": {"epsilon": 3.0},
    }
    run_id = client.post("/api/runs", json=spec).json()["id"]
    wait_until(client, run_id, lambda b: b["status"] not in ("queued", "preparing"), every=0.1)
    time.sleep(1.0)  # inside round 1
    body, took = cancelled_within(client, run_id)
    assert body["status"] == "cancelled" and took < 5.0, (body, took)
    assert (body["current_round"], body["epsilon"]) == (0, 0.0)  # round 1 released nothing
    assert client.get(f"/api/runs/{run_id}/ledger").json()["events"] == []
    (charge,) = client.get("/api/budgets/digits").json()["charges"]
    assert (charge["spent"], charge["settled"]) == (0.0, True)


@pytest.mark.slow
def test_cancel_ends_a_round_blocked_in_c_code(tmp_path):
    """A round that hangs in a native call, where the interrupt cannot land: the worker records the
    run cancelled, charged its round 1, and ends its pool process; the pool takes the next run."""
    spec = {
        "algorithm": "blocking_mbsgd",
        "dataset": {"name": "digits", "silos": 2},
        "rounds": 3,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    plugin = {"DPFL_PLUGINS": "tests.blocking_plugin"}
    with dpfl_up(tmp_path, workers=1, env=plugin) as url, httpx.Client(base_url=url, timeout=30) as http:
        run_id = http.post("/api/runs", json=spec).json()["id"]
        deadline = time.time() + 60
        while http.get(f"/api/runs/{run_id}").json()["current_round"] < 1:
            assert time.time() < deadline
            time.sleep(0.2)
        time.sleep(1.0)  # inside round 2's sleep
        assert http.post(f"/api/runs/{run_id}/cancel").status_code == 200
        deadline = time.time() + 90
        while (body := http.get(f"/api/runs/{run_id}").json())["status"] not in ("cancelled", "failed"):
            assert time.time() < deadline, body
            time.sleep(0.5)
        ledger = http.get(f"/api/runs/{run_id}/ledger").json()
        assert body["status"] == "cancelled" and body["current_round"] == 1, body
        assert {e["round"] for e in ledger["events"]} == {1}
        assert body["epsilon"] == pytest.approx(ledger["epsilon"]) and body["epsilon"] > 0
        after = http.post("/api/runs", json=spec | {"algorithm": "isrl_mbsgd"}).json()["id"]
        deadline = time.time() + 120
        while (done := http.get(f"/api/runs/{after}").json())["status"] not in ("succeeded", "failed"):
            assert time.time() < deadline, done
            time.sleep(0.5)
        assert done["status"] == "succeeded", done  # the worker goes on
        assert http.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"  # not re-run

"""POST/GET /api/runs/{id}/audit: queued like a run, executed by the task's body, stored on the row."""

from __future__ import annotations

import pytest

from backend.queue import AUDIT_RUN
from tests.backend.conftest import audit_here, run_here
from worker.app import app
from worker.tasks import audit_run

pytestmark = pytest.mark.service

PRIVATE = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
}
FEDAVG = {"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 4}, "rounds": 2}


def test_audit_task_is_registered_under_its_name():
    app.loader.import_default_modules()  # what a worker does at start: imports `worker.tasks`
    assert AUDIT_RUN == audit_run.name == "dpfl.audit_run"
    assert app.tasks[AUDIT_RUN].run == audit_run.run


def test_audit_of_a_private_run_bounds_epsilon_below_the_ledger(client, settings):
    run_id = client.post("/api/runs", json=PRIVATE).json()["id"]
    run_here(settings, run_id)
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "succeeded", run
    never = client.get(f"/api/runs/{run_id}/audit")
    assert (never.status_code, never.json()) == (200, None)  # a run page asks before any audit
    assert client.get("/api/runs/nope/audit").status_code == 404

    res = client.post(
        f"/api/runs/{run_id}/audit", json={"trials": 100_000, "seeds": 2, "black_box_trials": 200}
    )
    assert res.status_code == 202, res.text
    queued = res.json()
    assert (queued["run_id"], queued["status"], queued["trials"], queued["seeds"], queued["result"]) == (
        run_id,
        "queued",
        100_000,
        2,
        None,
    )
    assert queued["black_box_trials"] == 200
    assert client.get(f"/api/runs/{run_id}/audit").json()["status"] == "queued"

    audit_here(settings, queued["id"])
    done = client.get(f"/api/runs/{run_id}/audit").json()
    assert done["id"] == queued["id"] and done["status"] == "succeeded", done
    assert done["error"] is None and done["finished_at"] is not None
    releases = done["result"]["releases"]
    assert done["result"]["label"].startswith("not private")  # measured on private data without noise
    assert releases
    for r in releases:
        assert (r["trials"], r["seeds"], r["confidence"]) == (100_000, 2, 0.99)
        assert r["max_sensitivity_ratio"] <= 1 + 1e-6, r
        assert 0 < r["epsilon_lower"] <= r["epsilon_ledger"], r
        assert r["sound"] is True
    black = done["result"]["black_box"]  # the real release path, two rounds, the Dirac canary in silo 3
    assert (black["release"], black["rounds"], black["trials"], black["seeds"]) == ("silo-3", 2, 200, 2)
    assert black["verdict"] == "no violation found" and black["excess"] < 0, black
    assert 0 <= black["epsilon_lower"] < black["epsilon_ledger"]


def test_audit_refusals_name_the_run(client):
    for method in ("GET", "POST"):
        res = client.request(method, "/api/runs/nope/audit")
        assert res.status_code == 404
        assert res.json() == {"detail": "run 'nope' does not exist", "error": "NotFound"}

    run_id = client.post("/api/runs", json=FEDAVG).json()["id"]
    res = client.post(f"/api/runs/{run_id}/audit")
    assert res.status_code == 409
    assert res.json() == {
        "detail": f"run {run_id!r} is not private (fedavg releases without noise); there is nothing to audit",
        "error": "Conflict",
    }

    private_id = client.post("/api/runs", json=PRIVATE).json()["id"]
    for trials in (9_999, 1_000_001):
        res = client.post(f"/api/runs/{private_id}/audit", json={"trials": trials})
        assert res.status_code == 422, res.text
        assert res.json()["detail"][0]["loc"] == ["body", "trials"]
    for field, value, message in (
        ("seeds", 0, "Input should be greater than or equal to 1"),
        ("seeds", 11, "Input should be less than or equal to 10"),
        (
            "black_box_trials",
            50,
            "Value error, must be 0 (none) or ≥ 100: half the runs choose the test, half bound it",
        ),
        ("black_box_trials", 10_001, "Input should be less than or equal to 10000"),
    ):
        res = client.post(f"/api/runs/{private_id}/audit", json={field: value})
        assert res.status_code == 422, res.text
        assert (res.json()["detail"][0]["loc"], res.json()["detail"][0]["msg"]) == (["body", field], message)
    defaults = client.post(f"/api/runs/{private_id}/audit").json()
    assert (defaults["trials"], defaults["seeds"], defaults["black_box_trials"]) == (1_000_000, 1, 1_000)

    assert client.put("/api/budgets/digits", json={"total_epsilon": 100.0}).status_code == 200
    res = client.post(f"/api/runs/{private_id}/audit", json={"trials": 10_000})
    assert res.status_code == 409
    assert res.json() == {
        "detail": f"run {private_id!r} is protected: an audit releases round 1 10,000 times on the private "
        "data without accounting, so datasets with a budget ('digits') are not audited; audit the same "
        "spec on public data",
        "error": "Conflict",
    }

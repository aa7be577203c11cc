"""A user-level run stores how its records spread over users and draws it."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import data_dir

pytestmark = pytest.mark.service


def test_uldp_run_stores_and_draws_its_user_distribution(settings, client):
    data_dir()  # heart's files come from DPFL_DATA_DIR
    spec = {
        "algorithm": "uldp_avg_w",
        "params": {"global_lr": 10, "clip": 0.1, "local_lr": 0.005, "local_epochs": 2, "batch_size": 4},
        "dataset": {
            "name": "heart",
            "silos": 4,
            "partition": {"kind": "natural"},
            "users": {"kind": "zipf", "count": 50},
        },
        "model": {"name": "logreg"},
        "rounds": 3,
        "privacy": {"noise_multiplier": 5.0, "delta": 1e-5},
    }
    run_id = client.post("/api/runs", json=spec).json()["id"]
    run_here(settings, run_id)
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "succeeded"
    assert run["epsilon"] == pytest.approx(1.446, abs=1e-3)  # σ = 5, 3 rounds (reference §3.4)
    figures = client.get(f"/api/runs/{run_id}/figures").json()
    records, silos = figures["users"]["data"]
    assert sum(records["y"]) == 50  # every user in one bin
    assert silos["x"] == ["1", "2", "3", "4"] and sum(silos["y"]) == 50
    fedavg = client.post("/api/runs", json={**spec, "algorithm": "fedavg", "params": {}, "privacy": None})
    fedavg_id = fedavg.json()["id"]
    run_here(settings, fedavg_id)
    assert "users" in client.get(f"/api/runs/{fedavg_id}/figures").json()  # the spec names users
    plain = {**spec, "algorithm": "fedavg", "params": {}, "privacy": None}
    plain["dataset"] = {k: v for k, v in spec["dataset"].items() if k != "users"}
    plain_id = client.post("/api/runs", json=plain).json()["id"]
    run_here(settings, plain_id)
    assert "users" not in client.get(f"/api/runs/{plain_id}/figures").json()

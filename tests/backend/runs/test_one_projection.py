"""One projection (issue 38): the σ and plan computed at admission are the worker's."""

from __future__ import annotations

import json

import pytest

from dpfl.privacy.calibration.stored import store_of
from tests.backend.conftest import run_here

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 3},
    "model": {"name": "logreg"},
    "rounds": 3,
    "privacy": {"epsilon": 2.0},
}


def test_a_simulation_runs_worker_reuses_the_projection_admission_stored(client, settings):
    res = client.post("/api/runs", json=SPEC)
    assert res.status_code == 201
    stored = sorted(store_of(settings.cache_dir).glob("*.json"))
    assert len(stored) == 1  # written by admission, before any worker
    projection = json.loads(stored[0].read_text())
    assert projection["noise_multiplier"] == res.json()["noise_multiplier"]
    assert projection["planned"][-1] == res.json()["projected_epsilon"]
    run_here(settings, res.json()["id"])
    run = client.get(f"/api/runs/{res.json()['id']}").json()
    assert run["status"] == "succeeded", run["error"]
    # the worker found admission's projection under its own key: it wrote no other
    assert sorted(store_of(settings.cache_dir).glob("*.json")) == stored
    assert run["noise_multiplier"] == projection["noise_multiplier"]
    assert run["epsilon"] == pytest.approx(projection["planned"][-1], rel=1e-9)

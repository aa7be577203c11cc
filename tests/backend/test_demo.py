"""`dpfl up --demo` queues one small sweep on a fresh database, and only then."""

from __future__ import annotations

import pytest

from backend.demo import seed_demo

pytestmark = pytest.mark.service


def test_demo_sweep_is_queued_once(client, settings):
    sweep_id = seed_demo(settings)
    assert sweep_id is not None
    detail = client.get(f"/api/sweeps/{sweep_id}").json()
    # 5 ε × 2 seeds of isrl_mbsgd, and fedavg once per seed
    assert detail["num_runs"] == 12 and detail["counts"]["queued"] == 12
    assert {r["algorithm"] for r in detail["runs"]} == {"isrl_mbsgd", "fedavg"}
    assert seed_demo(settings) is None

"""A run whose privacy result carries a warning keeps it, and the API shows it."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service


def test_an_under_protecting_paper_calibration_is_stored_and_shown(settings, client):
    spec = service_spec(
        params={"lr": 0.5, "batch_size": 16, "clip": 1.0},
        rounds=10,
        privacy={"epsilon": 18.0, "delta": 1e-5, "calibration": "paper"},
    )
    warned = client.post("/api/runs", json=spec).json()["id"]
    plain = client.post("/api/runs", json=service_spec()).json()["id"]
    run_here(settings, warned)
    run_here(settings, plain)
    body = client.get(f"/api/runs/{warned}").json()
    assert body["epsilon"] > 18.0
    assert body["warning"] == (
        f"the paper calibration under-protects: the ledger gives ε = {body['epsilon']:.4g} "
        "(rdp, δ = 1e-5) for a target of 18"
    )
    assert client.get(f"/api/runs/{plain}").json()["warning"] is None

"""Per-silo budget figures for a dataset with natural silos (heart's four hospitals)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from tests.backend.conftest import run_here
from tests.factories import data_dir, service_spec

pytestmark = pytest.mark.service


def test_each_hospital_is_charged_its_own_releases(settings):
    data_dir()  # heart's files come from DPFL_DATA_DIR
    natural = service_spec(
        dataset={  # a protected run fits nothing on the records
            "name": "heart",
            "silos": 4,
            "partition": {"kind": "natural"},
            "options": {"standardise": "none"},
        },
        params={"lr": 0.5, "batch_size": 16, "clip": 1.0},
        rounds=4,
        participation=2,
        privacy={"noise_multiplier": 2.0, "delta": 1e-5},
    )
    shuffled = natural | {
        "dataset": natural["dataset"] | {"partition": {"kind": "iid"}},
        "participation": None,
    }
    with TestClient(create_app(settings)) as client:
        client.put("/api/budgets/heart", json={"total_epsilon": 20.0})
        first = client.post("/api/runs", json=natural).json()["id"]
        second = client.post("/api/runs", json=shuffled).json()["id"]
        run_here(settings, first)
        open_view = client.get("/api/budgets/heart").json()
        run_here(settings, second)
        parties = client.get(f"/api/runs/{first}/ledger").json()["parties"]
        whole = client.get(f"/api/runs/{second}").json()["epsilon"]
        budget = client.get("/api/budgets/heart").json()
    reserved_second = open_view["silos"]["silo-0"]["reserved"]
    assert reserved_second == pytest.approx(open_view["reserved"]) and reserved_second > 0
    own = {name: curve[-1] for name, curve in parties.items()}
    assert len(set(round(v, 9) for v in own.values())) > 1  # 2 of 4 silos a round: they differ
    for name, use in budget["silos"].items():
        # the natural run charges each hospital its own ε; the iid run (silos are not the
        # hospitals) charges each its whole ε
        assert use["spent"] == pytest.approx(own.get(name, 0.0) + whole, rel=1e-9)
        assert use["remaining"] == pytest.approx(20.0 - use["spent"])
        assert use["reserved"] == 0.0
    assert budget["spent"] == pytest.approx(
        max(own.values()) + whole, rel=1e-9
    )  # the dataset level: the maximum


def test_datasets_without_natural_silos_have_no_silo_view(client):
    client.put("/api/budgets/digits", json={"total_epsilon": 5.0})
    assert client.get("/api/budgets/digits").json()["silos"] is None

"""What the API serves of a run: no noiseless vote, diagnostics apart and labelled, caveats, and
protected datasets (a budget) that refuse seeded noise and non-private runs and withhold
diagnostics."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from backend.db import Database
from backend.models import LedgerEventRow
from tests.backend.conftest import run_here

pytestmark = pytest.mark.service

VOTING = {
    "algorithm": "ae_dpfl",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "params": {"queries": 20, "public_pool": 100, "student_epochs": 2},
    "privacy": {"noise_multiplier": 20.0, "delta": 1e-5},
}
ISRL = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
    "privacy": {"noise_multiplier": 2.0, "delta": 1e-5},
}
LABEL = "not private: computed from the private data without noise, not covered by the ledger's ε"


def _stored_withheld(settings, run_id: str) -> list:
    database = Database(settings.database_url)
    try:
        with database.session() as session:
            rows = session.scalars(select(LedgerEventRow).where(LedgerEventRow.run_id == run_id))
            return [r.withheld for r in rows]
    finally:
        database.engine.dispose()


def test_vote_histograms_stay_out_of_every_response(settings, client):
    run_id = client.post("/api/runs", json=VOTING).json()["id"]
    run_here(settings, run_id)
    ledger = client.get(f"/api/runs/{run_id}/ledger").json()
    events = [e for row in ledger["events"] for e in row["events"]]
    assert len(events) == 20 and all(e["counts"] is None for e in events)
    assert "counts" not in str(client.get(f"/api/runs/{run_id}/metrics").json()).replace("'counts': None", "")
    # the histograms are kept for the data-dependent accountant only
    withheld = [w for rows in _stored_withheld(settings, run_id) for w in rows]
    assert len(withheld) == 20 and all(sum(w["counts"]) == 4 for w in withheld)  # one vote per agent
    pate = client.get(f"/api/runs/{run_id}/ledger", params={"accountant": "pate"}).json()
    assert pate["epsilon"] <= ledger["epsilon"] + 1e-9
    final = client.get(f"/api/runs/{run_id}/metrics").json()[-1]
    private = {"queries_answered", "label_accuracy", "votes_cached", "epsilon_data_independent"}
    assert set(final["metrics"]) == private
    assert {"noiseless_label_accuracy", "mean_vote_gap", "train_loss"} <= set(final["diagnostics"])


def test_a_run_shows_its_caveats_and_labelled_diagnostics(settings, client):
    run_id = client.post("/api/runs", json=VOTING).json()["id"]
    run_here(settings, run_id)
    body = client.get(f"/api/runs/{run_id}").json()
    assert [c["kind"] for c in body["caveats"]] == ["simulation", "trusted"]
    assert body["protected"] is False
    assert body["diagnostics"]["label"] == LABEL and body["diagnostics"]["withheld"] is False
    assert len(body["diagnostics"]["label_histogram"]) == 4


def test_a_budgeted_dataset_refuses_non_private_runs_and_seeded_noise(client):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 50.0}).status_code == 200
    fedavg = client.post("/api/runs", json={"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 4}})
    assert fedavg.status_code == 409
    assert fedavg.json() == {
        "detail": "dataset 'digits' has a privacy budget, so only private runs may use it; fedavg is not "
        "private (it would release a model without noise)",
        "error": "Conflict",
    }
    seeded = client.post("/api/runs", json=ISRL | {"privacy": ISRL["privacy"] | {"noise_source": "seeded"}})
    assert seeded.status_code == 409
    assert seeded.json()["detail"] == (
        "`privacy.noise_source` must not be `seeded` on dataset 'digits': it has a privacy budget, so its "
        "runs draw noise from OS entropy; remove the field or give `auto`."
    )
    preview = client.post("/api/privacy/project", json=ISRL)
    assert preview.status_code == 200 and preview.json()["label_histogram"] is None


def test_a_protected_run_withholds_its_diagnostics(settings, client):
    # a voting pool is carved from the test split, which must then be public by declaration
    client.put("/api/budgets/digits", json={"total_epsilon": 50.0, "public_test": True})
    run_id = client.post("/api/runs", json=VOTING).json()["id"]
    run_here(settings, run_id)
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["status"] == "succeeded" and body["protected"] is True
    assert body["diagnostics"] == {"label": LABEL, "withheld": True}
    assert [c["kind"] for c in body["caveats"]] == ["trusted", "evaluation"]  # no simulation: OS entropy
    assert all(m["diagnostics"] is None for m in client.get(f"/api/runs/{run_id}/metrics").json())
    pate = client.get(f"/api/runs/{run_id}/ledger", params={"accountant": "pate"})
    assert pate.status_code == 409 and "withheld for datasets with a budget" in pate.json()["detail"]
    assert "partition" not in client.get(f"/api/runs/{run_id}/figures").json()


def test_an_uploaded_csv_is_budgeted_and_protected_under_its_own_name(settings, client):
    table = b"x1,x2,y\n" + b"".join(f"{i % 13},{i % 7},{i % 2}\n".encode() for i in range(300))
    upload = client.post(
        "/api/datasets", files={"file": ("t.csv", table)}, data={"name": "clinic", "label": "y"}
    )
    assert upload.status_code == 201
    assert client.put("/api/budgets/clinic", json={"total_epsilon": 20.0}).status_code == 200
    unfitted = upload.json()["spec_dataset"]
    unfitted["options"]["standardise"] = "none"  # a protected run fits nothing on the records
    spec = ISRL | {"dataset": unfitted | {"silos": 2}, "model": {"name": "logreg"}}
    run = client.post("/api/runs", json=spec).json()
    assert (run["dataset"], run["protected"]) == ("clinic", True)
    assert client.get("/api/budgets/clinic").json()["reserved"] == pytest.approx(run["projected_epsilon"])
    run_here(settings, run["id"])
    body = client.get(f"/api/runs/{run['id']}").json()
    assert body["status"] == "succeeded" and body["diagnostics"]["withheld"] is True
    spent = client.get("/api/budgets/clinic").json()["spent"]
    assert spent == pytest.approx(body["epsilon"]) and spent > 0
    refused = client.delete("/api/budgets/clinic")
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        f"dataset 'clinic' has spent ε {spent:.4g} of its budget; a budget that was spent cannot be "
        "deleted (a new one would forget that spending); change its total with PUT instead"
    )

"""A protected run's test metrics leak nothing (issue 39, measurement 1): its test split holds
records under the budget, so accuracy and loss are withheld unless the budget declares the split
public, and a voting algorithm (whose server holds test records as its pool) needs that
declaration."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service

WITHHELD = (
    "test accuracy and loss are withheld: the test split holds records under the dataset's budget "
    "(declare it public on the budget, `public_test`, to serve them)"
)
PUBLIC = "test accuracy and loss are measured on the test split, public by the budget's declaration"
VOTING = service_spec(
    algorithm="knn_dpfl",
    params={"public_pool": 100, "queries": 20, "student_epochs": 1},
    rounds=1,
    privacy={"epsilon": 3.0, "delta": 1e-5},
)


def test_a_protected_runs_test_metrics_are_withheld_unless_the_split_is_public(client, settings):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 50.0}).status_code == 200
    tiny_lr = service_spec(params={"lr": 1e-9, "batch_size": 64, "clip": 1.0}, rounds=1)
    run_id = client.post("/api/runs", json=tiny_lr).json()["id"]
    run_here(settings, run_id)
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "succeeded" and run["epsilon"] > 0
    assert (run["final_accuracy"], run["final_loss"]) == (None, None)
    assert {"kind": "evaluation", "text": WITHHELD, "breaks_guarantee": False} in run["caveats"]
    served = client.get(f"/api/runs/{run_id}/metrics").json()
    assert [(m["accuracy"], m["balanced_accuracy"], m["loss"]) for m in served] == [(None, None, None)]
    voting = client.post("/api/runs", json=VOTING)
    assert voting.status_code == 409
    assert voting.json()["detail"] == (
        "dataset 'digits' has a privacy budget and its test split is not declared public, but knn_dpfl's "
        "server holds test records as its public pool and reads their labels; declare the test split "
        "public on the budget (PUT /api/budgets/digits with public_test: true)"
    )
    changed = client.put("/api/budgets/digits", json={"total_epsilon": 50.0, "public_test": True})
    assert changed.status_code == 409  # charged under the old declaration

    public = {"total_epsilon": 50.0, "public_test": True}
    assert client.put("/api/budgets/breast_cancer", json=public).json()["public_test"] is True
    tumours = service_spec(
        dataset={"name": "breast_cancer", "silos": 2, "options": {"standardise": "none"}},
        model={"name": "logreg"},
        rounds=2,
    )
    served_id = client.post("/api/runs", json=tumours).json()["id"]
    run_here(settings, served_id)
    served = client.get(f"/api/runs/{served_id}").json()
    assert served["status"] == "succeeded" and 0.5 < served["final_accuracy"] <= 1
    assert {"kind": "evaluation", "text": PUBLIC, "breaks_guarantee": False} in served["caveats"]

"""A budget is a bound in one unit on records, not on a name (issue 39, measurements 2, 4, 5, 6):
it covers every loader and path that reads its bytes, takes every charge at its δ, refuses ε of
another notion or relation, and reserves the most any secret participation draw can spend."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import data_dir, service_spec

pytestmark = pytest.mark.service

FEDAVG = {"algorithm": "fedavg", "params": {"lr": 0.1}, "model": {"name": "logreg"}, "rounds": 1}
GDP = {
    "algorithm": "gdp_gd",
    "params": {"feature_clip": 3.0, "lr": 0.5},
    "dataset": {"name": "logistic", "silos": 4, "options": {"num_samples": 400, "num_test": 100}},
    "model": {"name": "logreg"},
    "rounds": 4,
    "privacy": {"epsilon": 2.0, "delta": 1e-5, "accountant": "gdp"},
}
USER = service_spec(  # σ given: a user-level ε target would be calibrated, which takes seconds
    algorithm="uldp_avg",
    params={},
    dataset={"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 20}},
    privacy={"noise_multiplier": 5.0, "delta": 1e-5},
)


def test_a_budget_covers_its_records_whatever_loader_or_path_reads_them(client):
    data_dir()
    assert client.put("/api/budgets/adult", json={"total_epsilon": 1.0}).status_code == 200
    by_loader = client.post("/api/runs", json=FEDAVG | {"dataset": {"name": "adult", "silos": 2}})
    as_csv = {"name": "csv", "silos": 2, "options": {"path": "adult/adult.data", "label": "<=50K"}}
    by_path = client.post("/api/runs", json=FEDAVG | {"dataset": as_csv})
    for refused in (by_loader, by_path):
        assert refused.status_code == 409
        assert refused.json()["detail"] == (
            "dataset 'adult' has a privacy budget, so only private runs may use it; fedavg is not "
            "private (it would release a model without noise)"
        )
    assert client.get("/api/budgets/adult").json()["spent"] == 0.0
    loader = client.put("/api/budgets/csv", json={"total_epsilon": 1.0})
    assert loader.status_code == 422
    assert loader.json()["detail"][0]["loc"] == ["path", "dataset"]


def test_a_budget_whose_test_split_is_public_does_not_cover_its_test_file(client):
    data_dir()
    assert client.put("/api/budgets/adult", json={"total_epsilon": 1.0}).status_code == 200
    test_file = {"name": "csv", "silos": 2, "options": {"path": "adult/adult.test", "label": "<=50K"}}
    assert client.post("/api/runs", json=FEDAVG | {"dataset": test_file}).status_code == 409  # private yet
    public = client.put("/api/budgets/adult", json={"total_epsilon": 1.0, "public_test": True})
    assert public.status_code == 200 and public.json()["public_test"] is True
    # past the budget now: it reaches the csv loader, which cannot read adult.test's first line
    res = client.post("/api/runs", json=FEDAVG | {"dataset": test_file})
    assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["body", "dataset", "path"]
    assert res.json()["detail"][0]["msg"].endswith("adult/adult.test has 15 fields; the header has 1.")
    train_file = test_file | {"options": test_file["options"] | {"path": "adult/adult.data"}}
    refused = client.post("/api/runs", json=FEDAVG | {"dataset": train_file})
    assert refused.status_code == 409 and refused.json()["detail"].startswith(
        "dataset 'adult' has a privacy budget"
    )


def test_an_upload_of_budgeted_bytes_is_under_that_budget(client):
    table = b"x1,x2,y\n" + b"".join(f"{i % 13},{i % 7},{i % 2}\n".encode() for i in range(300))
    for name in ("ward", "copy"):
        sent = client.post(
            "/api/datasets", files={"file": ("t.csv", table)}, data={"name": name, "label": "y"}
        )
        assert sent.status_code == 201
    assert client.put("/api/budgets/ward", json={"total_epsilon": 5.0}).status_code == 200
    again = client.put("/api/budgets/copy", json={"total_epsilon": 5.0})
    assert again.status_code == 409
    assert again.json()["detail"] == (
        "the records of 'copy' are under the privacy budget of 'ward' already (the same file's bytes); "
        "change that budget instead"
    )
    unfitted = sent.json()["spec_dataset"]
    unfitted["options"]["standardise"] = "none"  # protected data fits nothing on its records
    spec = service_spec(dataset=unfitted | {"silos": 2}, model={"name": "logreg"})
    run = client.post("/api/runs", json=spec).json()
    assert (run["dataset"], run["protected"]) == ("copy", True)  # shown under its name, charged to ward
    assert [c["run_id"] for c in client.get("/api/budgets/ward").json()["charges"]] == [run["id"]]


def test_a_run_whose_delta_is_above_the_budgets_is_refused_and_a_smaller_one_settles_at_the_budgets(
    client, settings
):
    assert client.put("/api/budgets/breast_cancer", json={"total_epsilon": 1.0}).status_code == 200
    tumours = {"name": "breast_cancer", "silos": 2, "options": {"standardise": "none"}}
    loose = service_spec(dataset=tumours, model={"name": "logreg"}, rounds=2)
    res = client.post("/api/runs", json=loose | {"privacy": {"epsilon": 0.45, "delta": 0.9}})
    assert res.status_code == 409
    assert res.json()["detail"] == (
        "dataset 'breast_cancer''s budget is in ε at δ = 1e-5; this run's ε holds at δ = 0.9, above it: "
        "give privacy.delta ≤ 1e-5"
    )
    strict = client.post("/api/runs", json=loose | {"privacy": {"noise_multiplier": 8.0, "delta": 1e-7}})
    assert strict.status_code == 201, strict.text
    run_here(settings, strict.json()["id"])
    run = client.get(f"/api/runs/{strict.json()['id']}").json()
    at_budget = client.get(f"/api/runs/{run['id']}/ledger", params={"delta": 1e-5}).json()["epsilon"]
    budget = client.get("/api/budgets/breast_cancer").json()
    assert budget["spent"] == pytest.approx(at_budget) and at_budget < 0.9 * run["epsilon"]
    assert budget["unit"] == "ε at δ = 1e-5 per record, add/remove neighbours"


def test_runs_of_another_notion_or_relation_are_refused(client):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 50.0}).status_code == 200
    assert client.post("/api/runs", json=service_spec()).status_code == 201  # sets the unit: record
    user = client.post("/api/runs", json=USER)
    assert user.status_code == 409
    assert user.json()["detail"] == (
        "dataset 'digits''s budget is in ε at δ = 1e-5 per record, add/remove neighbours; uldp_avg's ε "
        "is per user, add/remove neighbours: ε of different units do not add, so it cannot be charged "
        "to this budget"
    )
    changed = client.put("/api/budgets/digits", json={"total_epsilon": 50.0, "delta": 1e-6})
    assert changed.status_code == 409 and "its delta cannot change" in changed.json()["detail"]

    assert (
        client.put("/api/budgets/logistic", json={"total_epsilon": 50.0, "notion": "gdp"}).status_code == 200
    )
    gdp = client.post("/api/runs", json=GDP)
    assert gdp.status_code == 409  # gdp's relation is replace-one; a notion alone means add/remove
    assert "gdp_gd's ε is per gdp, replace/one neighbours" in gdp.json()["detail"]


def test_a_protected_reservation_bounds_every_participation_draw_and_the_run_settles_within_it(
    client, settings
):
    spec = service_spec(
        dataset={"name": "digits", "silos": 10},
        participation=2,
        rounds=6,
        privacy={"noise_multiplier": 1.5, "delta": 1e-5},
    )
    everyone = client.post("/api/privacy/project", json=spec | {"participation": None}).json()["epsilon"]
    assert client.put("/api/budgets/digits", json={"total_epsilon": everyone}).status_code == 200
    run = client.post("/api/runs", json=spec)
    assert run.status_code == 201, run.text
    (charge,) = client.get("/api/budgets/digits").json()["charges"]
    assert charge["reserved"] == pytest.approx(everyone) and run.json()["projected_epsilon"] < everyone
    run_here(settings, run.json()["id"])
    budget = client.get("/api/budgets/digits").json()
    assert 0 < budget["spent"] <= everyone and budget["remaining"] >= 0


def test_runs_whose_ledger_would_not_cover_what_they_release_are_refused_on_protected_data(client):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 500.0}).status_code == 200
    median = client.post(
        "/api/runs",
        json=USER
        | {
            "algorithm": "uldp_group",
            "params": {"group_size": "median"},
            # many users, few records each: a median group of 3 (the group ε of a large one is slow)
            "dataset": USER["dataset"] | {"users": {"kind": "uniform", "count": 400}},
        },
    )
    assert median.status_code == 409
    assert median.json()["detail"].startswith(
        "dataset 'digits' has a privacy budget, so its runs' ledgers must cover everything they release; "
        "this run's would not: "
    )
    pca = service_spec(dataset={"name": "digits", "silos": 4, "features": {"pca": 20}})
    refused = client.post("/api/runs", json=pca)
    assert refused.status_code == 409
    assert refused.json()["detail"].endswith(
        "this run's would not: PCA to 20 components fitted on the training rows, without noise: not covered "
        "by the ledger"
    )
    assert client.get("/api/budgets/digits").json()["reserved"] == 0.0

    assert client.put("/api/budgets/breast_cancer", json={"total_epsilon": 50.0}).status_code == 200
    tumours = service_spec(dataset={"name": "breast_cancer", "silos": 2}, model={"name": "logreg"})
    fitted = client.post("/api/runs", json=tumours)
    assert fitted.status_code == 409
    assert fitted.json()["detail"].endswith(
        "features standardised with the training rows' mean and standard deviation, without noise: not "
        'covered by the ledger; give dataset.options {"standardise": "none"} to fit nothing on the records'
    )
    tumours["dataset"]["options"] = {"standardise": "none"}
    admitted = client.post("/api/runs", json=tumours)
    assert admitted.status_code == 201 and admitted.json()["protected"] is True

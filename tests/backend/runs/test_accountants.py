"""The headline ε comes from a sound, data-independent accountant: what the API refuses and labels."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from backend.db import Database
from backend.models import Run
from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service

GDP_CLT = (
    "must account every planned release exactly; 'gdp' would not: Poisson-sampled Gaussian accounted by "
    "the GDP central limit theorem (approximate; can underestimate ε). An approximate ε can neither "
    "calibrate σ nor be the headline ε; use rdp or pld; got 'gdp'."
)
PATE = (
    "must be data-independent: 'pate' is data-dependent (its ε is computed from the noiseless vote "
    "histograms, so it is not itself differentially private); the headline ε uses a data-independent "
    "accountant such as rdp or pld, and the data-dependent bound is reported beside it; got 'pate'."
)
CLT_NOTE = (
    "Poisson-sampled Gaussian accounted by the GDP central limit theorem (approximate; can underestimate ε)"
)
PATE_NOTE = "data-dependent: the ε depends on the private vote histograms"


@pytest.mark.parametrize("path", ["/api/runs", "/api/privacy/project"])
@pytest.mark.parametrize(
    ("privacy", "msg"),
    [
        # an ε target needs no plan to be admitted, but this accountant is checked on the plan
        ({"epsilon": 2.0, "delta": 1e-5, "accountant": "gdp"}, GDP_CLT),
        ({"noise_multiplier": 2.0, "delta": 1e-5, "accountant": "gdp"}, GDP_CLT),
        ({"epsilon": 2.0, "delta": 1e-5, "accountant": "pate"}, PATE),
    ],
)
def test_an_accountant_that_cannot_give_the_headline_is_422(client, path, privacy, msg):
    client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
    res = client.post(path, json=service_spec(privacy=privacy))
    assert res.status_code == 422
    assert res.json() == {
        "detail": [{"loc": ["body", "privacy", "accountant"], "msg": msg, "type": "value_error"}],
        "error": "SpecError",
    }
    assert client.get("/api/runs").json()["total"] == 0
    assert client.get("/api/budgets/digits").json()["reserved"] == 0


def test_a_gdp_algorithm_is_still_admitted_with_gdp(client):
    spec = {
        "algorithm": "gdp_gd",
        "params": {"feature_clip": 3.0, "lr": 0.5},
        "dataset": {"name": "logistic", "silos": 4, "options": {"num_samples": 400, "num_test": 100}},
        "model": {"name": "logreg"},
        "rounds": 4,
        "privacy": {"epsilon": 2.0, "delta": 1e-5, "accountant": "gdp"},
    }
    res = client.post("/api/runs", json=spec)
    assert res.status_code == 201, res.json()
    body = res.json()
    assert body["accountant"] == "gdp"
    assert body["projected_epsilon"] == pytest.approx(2.0, rel=1e-9)  # the closed form meets it exactly


def test_a_ledger_recomputed_by_gdp_or_pate_is_labelled(settings, client):
    run_id = client.post(
        "/api/runs", json=service_spec(privacy={"noise_multiplier": 2.0, "delta": 1e-5})
    ).json()["id"]
    run_here(settings, run_id)
    own = client.get(f"/api/runs/{run_id}/ledger").json()
    assert (own["accountant"], own["approximate"], own["data_dependent"], own["notes"]) == (
        "rdp",
        False,
        False,
        [],
    )
    gdp = client.get(f"/api/runs/{run_id}/ledger", params={"accountant": "gdp"}).json()
    assert (gdp["accountant"], gdp["approximate"], gdp["data_dependent"], gdp["notes"]) == (
        "gdp",
        True,
        False,
        [CLT_NOTE],
    )
    assert gdp["epsilon"] < own["epsilon"]  # the CLT under-reports this ledger
    pate = client.get(f"/api/runs/{run_id}/ledger", params={"accountant": "pate"}).json()
    assert (pate["approximate"], pate["data_dependent"], pate["notes"]) == (False, True, [PATE_NOTE])
    figure = client.get(f"/api/runs/{run_id}/figures", params={"accountant": "gdp"}).json()["epsilon"]
    assert figure["layout"]["title"]["text"] == "ε spent per party (gdp, approximate, δ = 1e-5)"


def test_a_run_stored_with_pate_defaults_to_a_data_independent_ledger(settings, client):
    # runs admitted before the rule: their ledger's default (which settles the budget) is rdp
    run_id = client.post(
        "/api/runs", json=service_spec(privacy={"noise_multiplier": 2.0, "delta": 1e-5})
    ).json()["id"]
    run_here(settings, run_id)
    rdp = client.get(f"/api/runs/{run_id}/ledger").json()
    database = Database(settings.database_url)
    try:
        with database.engine.begin() as conn:
            conn.execute(update(Run).where(Run.id == run_id).values(accountant="pate"))
    finally:
        database.engine.dispose()
    assert client.get(f"/api/runs/{run_id}").json()["accountant"] == "pate"
    ledger = client.get(f"/api/runs/{run_id}/ledger").json()
    assert (ledger["accountant"], ledger["epsilon"], ledger["data_dependent"]) == (
        "rdp",
        rdp["epsilon"],
        False,
    )

"""PUT and DELETE /api/budgets/{dataset} refusals: an unknown or missing dataset, a spent budget."""

from __future__ import annotations

import datetime as dt

import pytest

from backend.db import Database
from backend.models import BudgetCharge, Run
from dpfl.data import registered_datasets

pytestmark = pytest.mark.service

REGISTERED = ", ".join(sorted(registered_datasets()))


def test_an_unknown_dataset_is_a_404_listing_the_allowed_ones(client):
    res = client.put("/api/budgets/nope", json={"total_epsilon": 1.0})
    assert res.status_code == 404
    assert res.json() == {
        "detail": "dataset 'nope' is neither a registered dataset nor an upload, so it cannot have a "
        f"budget; allowed: {REGISTERED}",
        "error": "NotFound",
    }
    assert client.get("/api/budgets").json() == []


@pytest.mark.parametrize(("method", "path"), [("PUT", "/api/budgets/"), ("DELETE", "/api/budgets/")])
def test_a_write_without_a_dataset_is_a_422_naming_it(client, method, path):
    res = client.request(method, path, json={"total_epsilon": 1.0})
    assert res.status_code == 422
    assert res.json() == {
        "detail": [
            {
                "loc": ["path", "dataset"],
                "msg": f"is missing: write to /api/budgets/{{dataset}}, one of {REGISTERED}.",
                "type": "value_error",
            }
        ],
        "error": "SpecError",
    }


def test_deleting_a_spent_budget_is_refused_and_an_absent_one_lists_the_budgets(client, settings):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 3.0}).status_code == 200
    database = Database(settings.database_url)
    with database.session() as session:
        session.add(
            Run(id="r1", status="succeeded", algorithm="isrl_mbsgd", dataset="digits", rounds=1, spec={})
        )
        session.flush()
        session.add(
            BudgetCharge(
                run_id="r1", dataset="digits", reserved=1.0, spent=0.75, settled_at=dt.datetime.now(dt.UTC)
            )
        )
    database.engine.dispose()
    res = client.delete("/api/budgets/digits")
    assert res.status_code == 409
    assert res.json() == {
        "detail": "dataset 'digits' has spent ε 0.75 of its budget; a budget that was spent cannot be "
        "deleted (a new one would forget that spending); change its total with PUT instead",
        "error": "Conflict",
    }
    missing = client.delete("/api/budgets/heart")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "dataset 'heart' has no privacy budget; datasets with one: digits"
    assert client.get("/api/budgets/digits").json()["spent"] == 0.75


def test_a_run_that_spent_budget_cannot_be_deleted_and_its_spending_stays(client, settings):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 3.0}).status_code == 200
    database = Database(settings.database_url)
    with database.session() as session:
        for run_id, spent in (("spent", 0.75), ("free", 0.0)):
            session.add(
                Run(
                    id=run_id, status="succeeded", algorithm="isrl_mbsgd", dataset="digits", rounds=1, spec={}
                )
            )
            session.flush()
            session.add(
                BudgetCharge(
                    run_id=run_id,
                    dataset="digits",
                    reserved=1.0,
                    spent=spent,
                    settled_at=dt.datetime.now(dt.UTC),
                )
            )
    database.engine.dispose()
    res = client.delete("/api/runs/spent")
    assert res.status_code == 409
    assert res.json() == {
        "detail": "run 'spent' spent ε 0.75 of dataset 'digits''s privacy budget; deleting it would forget "
        "that spending, so archive it instead (PATCH archived: true)",
        "error": "Conflict",
    }
    assert client.get("/api/budgets/digits").json()["spent"] == 0.75
    assert client.delete("/api/runs/free").status_code == 204

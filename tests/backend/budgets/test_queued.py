"""A budget set while runs wait in the queue bounds them too (issue 39, measurement 3): each run
reserves its ε when it starts, or fails before it releases anything."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service


def test_runs_queued_before_a_budget_are_charged_or_refused_when_they_start(client, settings):
    spec = service_spec(privacy={"epsilon": 3.0, "delta": 1e-5})
    first, second = (client.post("/api/runs", json=spec | {"seed": s}).json()["id"] for s in (1, 2))
    assert client.put("/api/budgets/digits", json={"total_epsilon": 5.0}).status_code == 200
    assert client.get("/api/budgets/digits").json()["reserved"] == 0.0  # admitted before it existed
    run_here(settings, first)
    run_here(settings, second)
    one, two = (client.get(f"/api/runs/{i}").json() for i in (first, second))
    assert (one["status"], one["protected"]) == ("succeeded", True), one["error"]
    assert two["status"] == "failed"
    assert two["error"] == (
        "dataset 'digits' gained a privacy budget while this run waited: dataset 'digits' has ε "
        f"{5.0 - one['epsilon']:.4g} left of 5; this run needs 3"
    )
    assert client.get(f"/api/runs/{second}/ledger").json()["events"] == []  # nothing released
    budget = client.get("/api/budgets/digits").json()
    assert budget["charges"] == [
        {
            "run_id": first,
            "reserved": pytest.approx(one["epsilon"]),
            "spent": pytest.approx(one["epsilon"]),
            "settled": True,
        }
    ]
    # the invariant: the charges cover every release on the data since the budget was set
    assert budget["spent"] == pytest.approx(one["epsilon"]) and budget["spent"] <= budget["total_epsilon"]


def test_a_non_private_run_queued_before_a_budget_is_refused_when_it_starts(client, settings):
    run_id = client.post(
        "/api/runs", json=service_spec(algorithm="fedavg", params={"lr": 0.5}, privacy=None)
    ).json()["id"]
    client.put("/api/budgets/digits", json={"total_epsilon": 5.0})
    run_here(settings, run_id)
    run = client.get(f"/api/runs/{run_id}").json()
    assert (run["status"], run["current_round"]) == ("failed", 0)
    assert run["error"] == (
        "dataset 'digits' gained a privacy budget while this run waited; only private runs may use it, "
        "and fedavg is not private"
    )

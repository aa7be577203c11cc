"""PATCH and DELETE /api/sweeps/{id}, and GET /api/sweeps's `q` and `archived`, against a real
database (Postgres and SQLite), no worker."""

from __future__ import annotations

import datetime as dt

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from backend.main import create_app
from backend.models import Budget, BudgetCharge, LedgerEventRow, RoundMetric, Run, Sweep

pytestmark = pytest.mark.service

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def add_sweep(settings, sweep_id: str, statuses: list[str], *, minute: int = 0, name: str = "grid") -> None:
    """Stores a sweep with one run per status (ids <sweep>-0, <sweep>-1, …), each with a metric row."""
    database = Database(settings.database_url)
    with database.session() as session:
        created = T0 + dt.timedelta(minutes=minute)
        session.add(
            Sweep(id=sweep_id, name=name, base={}, grid={}, num_runs=len(statuses), created_at=created)
        )
        session.flush()
        for i, status in enumerate(statuses):
            run_id = f"{sweep_id}-{i}"
            session.add(
                Run(
                    id=run_id,
                    status=status,
                    algorithm="fedavg",
                    dataset="digits",
                    rounds=1,
                    spec={},
                    sweep_id=sweep_id,
                )
            )
            session.flush()
            session.add(RoundMetric(run_id=run_id, round=1, accuracy=0.5, loss=1.0))
    database.engine.dispose()


def count(settings, model) -> int:
    database = Database(settings.database_url)
    with database.session() as session:
        n = session.query(model).count()
    database.engine.dispose()
    return n


def test_patch_annotates_a_sweep_and_reads_show_it(client, settings):
    add_sweep(settings, "s1", ["succeeded"])
    res = client.patch("/api/sweeps/s1", json={"name": "ε grid", "tags": ["paper ", "paper"], "notes": "v2"})
    assert res.status_code == 200
    body = res.json()
    assert (body["name"], body["tags"], body["notes"], body["archived"]) == ("ε grid", ["paper"], "v2", False)
    assert body["counts"]["succeeded"] == 1
    detail = client.get("/api/sweeps/s1").json()
    assert (detail["name"], detail["tags"], detail["notes"]) == ("ε grid", ["paper"], "v2")
    listed = client.get("/api/sweeps").json()["items"][0]
    assert (listed["name"], listed["tags"], listed["archived"]) == ("ε grid", ["paper"], False)
    bad = client.patch("/api/sweeps/s1", json={"tags": ["a,b"]})
    assert bad.status_code == 422 and bad.json()["detail"] == [
        {
            "loc": ["body", "tags"],
            "msg": "tag 0 must be 1 to 40 characters after trimming, without commas; got 'a,b'",
            "type": "tag",
        }
    ]
    missing = client.patch("/api/sweeps/nope", json={"name": "x"})
    assert missing.status_code == 404
    assert missing.json() == {"detail": "sweep 'nope' does not exist", "error": "NotFound"}


def test_list_hides_archived_sweeps_and_searches(client, settings):
    add_sweep(settings, "s1", [], minute=0, name="mnist ε")
    add_sweep(settings, "s2", [], minute=1, name="heart users")
    add_sweep(settings, "t3", [], minute=2, name="old")
    client.patch("/api/sweeps/t3", json={"archived": True, "tags": ["Paper"]})
    client.patch("/api/sweeps/s1", json={"tags": ["paper"]})

    def ids(**params):
        res = client.get("/api/sweeps", params=params)
        assert res.status_code == 200, res.text
        return [s["id"] for s in res.json()["items"]], res.json()["total"]

    assert ids() == (["s2", "s1"], 2)
    assert ids(archived="true") == (["t3"], 1)
    assert ids(archived="all") == (["t3", "s2", "s1"], 3)
    assert ids(q="PAPER", archived="all") == (["t3", "s1"], 2)
    assert ids(q="Heart") == (["s2"], 1)
    assert ids(q="s") == (["s2", "s1"], 2)  # id prefix (and "users")
    res = client.get("/api/sweeps", params={"archived": "no"})
    assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["query", "archived"]


def test_delete_removes_a_finished_sweep_and_its_runs(client, settings):
    add_sweep(settings, "s1", ["succeeded", "failed", "cancelled"])
    add_sweep(settings, "s2", ["succeeded"])
    res = client.delete("/api/sweeps/s1")
    assert res.status_code == 204
    assert client.get("/api/sweeps/s1").status_code == 404
    assert [r["id"] for r in client.get("/api/runs").json()["items"]] == ["s2-0"]
    assert count(settings, RoundMetric) == 1 and count(settings, Sweep) == 1
    again = client.delete("/api/sweeps/s1")
    assert again.status_code == 404 and again.json()["detail"] == "sweep 's1' does not exist"


def test_delete_is_refused_while_a_run_is_queued_or_running(client, settings):
    add_sweep(settings, "s1", ["succeeded", "running", "queued"])
    res = client.delete("/api/sweeps/s1")
    assert res.status_code == 409
    assert res.json() == {
        "detail": "sweep 's1' has 2 queued or running runs (s1-1, s1-2); cancel them (POST "
        "/api/runs/{id}/cancel) and wait for them to finish, or archive the sweep (PATCH archived: true)",
        "error": "Conflict",
    }
    assert count(settings, Run) == 3 and count(settings, RoundMetric) == 3


def test_delete_is_refused_when_a_run_spent_privacy_budget(client, settings):
    add_sweep(settings, "s1", ["succeeded", "succeeded"])
    database = Database(settings.database_url)
    with database.session() as session:
        session.add(Budget(dataset="digits", total_epsilon=5.0))
        session.flush()
        session.add(BudgetCharge(run_id="s1-0", dataset="digits", reserved=1.0, spent=0.8, settled_at=T0))
        session.add(LedgerEventRow(run_id="s1-0", round=1, party="silo-0", events=[]))
    database.engine.dispose()
    res = client.delete("/api/sweeps/s1")
    assert res.status_code == 409
    assert res.json()["detail"] == (
        "sweep 's1' has runs that spent privacy budget (1 on dataset 'digits'); deleting them would "
        "forget that spending, so archive the sweep instead (PATCH archived: true)"
    )
    assert client.get("/api/budgets/digits").json()["spent"] == 0.8
    assert client.patch("/api/sweeps/s1", json={"archived": True}).json()["archived"] is True


def test_patch_and_delete_need_a_token_when_tokens_are_set(settings):
    add_sweep(settings, "s1", ["succeeded"])
    guarded = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(guarded)) as c:
        assert c.patch("/api/sweeps/s1", json={"name": "x"}).status_code == 401
        assert c.delete("/api/sweeps/s1").status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert c.patch("/api/sweeps/s1", json={"name": "x"}, headers=auth).json()["name"] == "x"
        assert c.delete("/api/sweeps/s1", headers=auth).status_code == 204

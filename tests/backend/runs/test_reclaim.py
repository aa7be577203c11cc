"""A run taken again after its worker died starts its progress afresh (Postgres and SQLite)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import delete, update

from backend.db import Database
from backend.models import BudgetCharge, LedgerEventRow, RoundMetric, Run
from backend.runs import service
from tests.backend.conftest import run_here
from tests.factories import service_spec
from worker import execution

pytestmark = pytest.mark.service


def test_a_requeued_run_shows_no_progress_of_its_lost_attempt(client, settings):
    run_id = client.post("/api/runs", json=service_spec(rounds=3)).json()["id"]
    database = Database(settings.database_url)
    try:
        assert execution.claim(database, run_id, worker="w1@lost")
        with database.session() as session:  # what the first worker recorded before it died
            session.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(
                    current_round=2,
                    progress=2 / 3,
                    final_accuracy=0.5,
                    final_loss=1.5,
                    heartbeat_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
                )
            )
        with database.session() as session:
            assert service.requeue_stale(session, settings=settings) == [run_id]
        queued = client.get(f"/api/runs/{run_id}").json()
        assert (queued["status"], queued["current_round"], queued["progress"]) == ("queued", 0, 0.0)
        assert (queued["final_accuracy"], queued["final_loss"], queued["worker"]) == (None, None, None)
        assert execution.claim(database, run_id, worker="w2@next")
        claimed = client.get(f"/api/runs/{run_id}").json()
        # claimed, not yet started: preparing (its start loads the data and calibrates σ)
        assert (claimed["status"], claimed["attempts"], claimed["worker"]) == ("preparing", 2, "w2@next")
        assert (claimed["current_round"], claimed["progress"], claimed["final_accuracy"]) == (0, 0.0, None)
        with database.session() as session:  # a run left over from before (no reset at requeue)
            session.execute(
                update(Run).where(Run.id == run_id).values(status="queued", current_round=2, progress=2 / 3)
            )
        assert execution.claim(database, run_id, worker="w3@next")
        again = client.get(f"/api/runs/{run_id}").json()
        assert (again["current_round"], again["progress"], again["attempts"]) == (0, 0.0, 3)
    finally:
        database.engine.dispose()
    with database.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(status="queued"))
    run_here(settings, run_id)
    done = client.get(f"/api/runs/{run_id}").json()
    assert (done["status"], done["current_round"], done["progress"]) == ("succeeded", 3, 1.0)


def test_a_protected_run_whose_worker_died_after_a_release_is_failed_not_rerun(client, settings):
    """A re-run would draw fresh noise (a protected run's key is secret) and overwrite the lost
    attempt's ledger rows, whose releases were already served: it ends failed, charged them."""
    client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
    run_id = client.post(
        "/api/runs", json=service_spec(rounds=3, privacy={"epsilon": 3.0, "delta": 1e-5})
    ).json()["id"]
    assert client.get(f"/api/runs/{run_id}").json()["protected"] is True
    run_here(settings, run_id)  # its releases, as a worker records them; then rewound to its round 1
    database = Database(settings.database_url)
    try:
        with database.session() as session:
            session.execute(
                delete(LedgerEventRow).where(LedgerEventRow.run_id == run_id, LedgerEventRow.round > 1)
            )
            session.execute(delete(RoundMetric).where(RoundMetric.run_id == run_id, RoundMetric.round > 1))
            session.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(
                    status="running",
                    current_round=1,
                    finished_at=None,
                    heartbeat_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
                )
            )
            session.execute(
                update(BudgetCharge).where(BudgetCharge.run_id == run_id).values(spent=None, settled_at=None)
            )
        with database.session() as session:
            assert service.requeue_stale(session, settings=settings) == []  # not sent again
    finally:
        database.engine.dispose()
    run = client.get(f"/api/runs/{run_id}").json()
    released = client.get(f"/api/runs/{run_id}/ledger").json()["epsilon"]
    assert 0 < released < 3.0
    assert run["status"] == "failed" and run["attempts"] == 1
    assert run["error"] == (
        f"worker lost after round 1 (last: {run['worker']}): a protected run is not re-run, since a new "
        f"attempt would draw fresh noise; it is charged the ε its recorded rounds released ({released:.4g})"
    )
    assert run["epsilon"] == pytest.approx(released, rel=1e-12)
    budget = client.get("/api/budgets/digits").json()
    assert budget["charges"] == [
        {"run_id": run_id, "reserved": 3.0, "spent": pytest.approx(released), "settled": True}
    ]
    assert budget["reserved"] == 0.0

"""A run taken again after its worker died starts its progress afresh (Postgres and SQLite)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import update

from backend.db import Database
from backend.models import Run
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

"""Audits that end: one at a time per run and a few in all, sent when the broker is back,
failed when their worker dies, and bounded in memory and time in a process of their own."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend import dispatch
from backend.audits import service
from backend.db import Database
from backend.main import create_app
from backend.queue import make_celery
from tests.backend.audits.test_router import PRIVATE
from tests.backend.conftest import audit_here, run_here
from worker import audit

pytestmark = pytest.mark.service


@pytest.fixture
def finished(client, settings) -> list[str]:
    """Three succeeded private runs."""
    ids = [client.post("/api/runs", json=PRIVATE | {"seed": s}).json()["id"] for s in range(3)]
    for run_id in ids:
        run_here(settings, run_id)
    return ids


def test_a_run_is_audited_once_at_a_time_and_the_server_takes_a_few_at_once(settings, finished):
    with TestClient(create_app(settings.model_copy(update={"max_open_audits": 2}))) as client:
        first = client.post(f"/api/runs/{finished[0]}/audit", json={})
        assert first.status_code == 202
        again = client.post(f"/api/runs/{finished[0]}/audit", json={})
        assert again.status_code == 409
        assert again.json()["detail"] == (
            f"run {finished[0]!r} is being audited already (audit {first.json()['id']}, queued); wait for it"
        )
        assert client.post(f"/api/runs/{finished[1]}/audit", json={}).status_code == 202
        third = client.post(f"/api/runs/{finished[2]}/audit", json={})
        assert third.status_code == 429 and third.headers["retry-after"] == "60"
        assert third.json() == {
            "detail": "2 audits are queued or running, the most this server takes at once "
            "(DPFL_MAX_OPEN_AUDITS); send it again once one has finished",
            "error": "TooManyRequests",
        }


def test_an_audit_posted_while_the_broker_is_down_is_queued_and_sent_later(settings, finished):
    down = settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"})
    with TestClient(create_app(down)) as client:
        res = client.post(f"/api/runs/{finished[0]}/audit", json={})
    assert res.status_code == 202 and res.json()["status"] == "queued"  # was a 500, queued for good
    database = Database(settings.database_url)
    try:
        now = settings.model_copy(update={"dispatch_timeout_s": 0.0})  # it is old enough already
        assert dispatch.dispatch_audits(database, make_celery(settings), now) == [res.json()["id"]]
    finally:
        database.engine.dispose()


def test_an_audit_whose_worker_died_fails_with_the_reason(client, settings, finished):
    audit_id = client.post(f"/api/runs/{finished[0]}/audit", json={}).json()["id"]
    database = Database(settings.database_url)
    try:
        assert audit.claim(database, audit_id, worker="w1@gone")  # and it was killed: no beat
        with database.session() as session:
            assert service.fail_lost(session, settings=settings) == [audit_id]
    finally:
        database.engine.dispose()
    body = client.get(f"/api/runs/{finished[0]}/audit").json()
    assert body["status"] == "failed"
    assert body["error"] == (
        "worker lost: w1@gone stopped while auditing (killed, or out of memory); "
        "POST the audit again to retry"
    )


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        (
            {"audit_memory_mb": 400},  # too little to load torch's libraries
            "the audit needed more than its 400 MB of memory (DPFL_AUDIT_MEMORY_MB): audit a spec with "
            "fewer silos or a smaller dataset, or raise the limit",
        ),
        (
            {"audit_timeout_s": 0.5},
            "the audit took longer than 0.5 s (DPFL_AUDIT_TIMEOUT_S) and was stopped; audit fewer "
            "trials or a smaller spec, or raise the limit",
        ),
    ],
)
def test_an_audit_beyond_its_memory_or_time_fails_alone(client, settings, finished, limits, error):
    audit_id = client.post(f"/api/runs/{finished[0]}/audit", json={}).json()["id"]
    audit_here(settings.model_copy(update=limits), audit_id)  # the worker (this process) lives on
    body = client.get(f"/api/runs/{finished[0]}/audit").json()
    assert (body["status"], body["error"]) == ("failed", error)

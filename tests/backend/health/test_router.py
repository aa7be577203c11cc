"""GET /api/health: database, broker and workers, on both transports."""

from __future__ import annotations

from importlib import metadata

import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from tests.backend.conftest import make_settings, wait_for

pytestmark = pytest.mark.service


def test_health_is_200_when_database_and_broker_are_ok(client):
    res = client.get("/api/health")
    assert res.status_code == 200
    assert res.json() == {
        "database": "ok",
        "broker": "ok",
        "workers": [],
        "version": metadata.version("dpfl-explorer"),
    }


def test_unreachable_broker_is_503_with_the_error(settings):
    broken = settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"})
    with TestClient(create_app(broken)) as c:
        res = c.get("/api/health")
    assert res.status_code == 503
    body = res.json()
    assert (body["database"], body["workers"]) == ("ok", [])
    assert body["broker"].startswith("OperationalError: ") and "127.0.0.1:1" in body["broker"]


def test_a_worker_that_ran_a_run_is_listed(client, worker):
    spec = {"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 2}, "rounds": 1}
    run = wait_for(client, client.post("/api/runs", json=spec).json()["id"], {"succeeded", "failed"})
    assert run["status"] == "succeeded", run["error"]
    body = client.get("/api/health").json()
    assert body["workers"] == [run["worker"]]  # one name, whether from its heartbeat or its ping


def test_an_embedded_broker_that_cannot_write_its_messages_is_503(tmp_path):
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    settings = make_settings(tmp_path, url)
    with TestClient(create_app(settings)) as c:
        assert c.get("/api/health").json()["broker"] == "ok"
        queue = settings.broker_folder / "queue"
        queue.rmdir()
        queue.symlink_to("/sys/kernel")  # a folder no process may write in: a read-only disk
        res = c.get("/api/health")
    assert res.status_code == 503
    assert res.json()["broker"].startswith("PermissionError: [Errno ")  # EACCES or EPERM
    assert f"'{queue}/.health-" in res.json()["broker"]  # the folder it could not write in

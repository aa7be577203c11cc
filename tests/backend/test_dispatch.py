"""Every admitted run is run: a message the API never sent, the broker lost, or could not take
while down is sent again by the API's dispatcher (backend.dispatch). Real Postgres, Redis
servers and Celery workers; SQLite with the filesystem transport too."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from backend import migrate
from backend.db import Database
from backend.main import create_app
from backend.models import Run
from backend.queue import make_celery, pending_runs
from backend.runs import service as runs
from dpfl.spec import parse_spec
from tests.backend.conftest import ROOT, WorkerProcess, _truncate, make_settings, wait_for
from tests.factories import service_spec

pytestmark = pytest.mark.service

SPEC = service_spec(rounds=1)  # ε target 2: admitted against the budget without loading data
FAST = {"dispatch_timeout_s": 2.0}


class RedisServer:
    """A Redis of this test's own on a free port, without persistence: a SIGKILL loses its messages."""

    def __init__(self, log: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        cmd = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("a"), stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path / "redis.log")
    yield server
    server.kill()


@pytest.fixture
def pg_settings(postgres_url, tmp_path, own_redis):
    migrate.upgrade(postgres_url)
    _truncate(postgres_url)
    return make_settings(tmp_path, postgres_url, own_redis.url, **FAST)


def _queued_without_message(settings, count: int) -> list[str]:
    """Admits `count` runs and commits them without sending their messages: what an API killed
    between its commit and its send leaves behind."""
    database = Database(settings.database_url)
    try:
        with database.session() as session:
            made = [
                runs.create_run(session, spec=parse_spec(SPEC | {"seed": i}), settings=settings)
                for i in range(count)
            ]
            return [run.id for run in made]
    finally:
        database.engine.dispose()


def _assert_all_ran(client: TestClient, run_ids: list[str], timeout: float = 120) -> None:
    bodies = [wait_for(client, run_id, {"succeeded", "failed"}, timeout=timeout) for run_id in run_ids]
    assert [b["status"] for b in bodies] == ["succeeded"] * len(run_ids), [b["error"] for b in bodies]
    assert [b["attempts"] for b in bodies] == [1] * len(run_ids)
    budget = client.get("/api/budgets/digits").json()
    assert budget["reserved"] == 0 and budget["spent"] == pytest.approx(sum(b["epsilon"] for b in bodies))


@pytest.mark.slow
def test_post_while_redis_is_down_is_201_and_runs_when_it_is_back(pg_settings, own_redis, tmp_path):
    worker = WorkerProcess(pg_settings, tmp_path / "worker.log")
    try:
        with TestClient(create_app(pg_settings)) as client:
            client.put("/api/budgets/digits", json={"total_epsilon": 50.0})
            own_redis.kill()
            started = time.monotonic()
            res = client.post("/api/runs", json=SPEC)
            took = time.monotonic() - started
            assert res.status_code == 201, res.text
            assert took < 5.0  # the send fails fast; the request is not held by a dead broker
            run_id = res.json()["id"]
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            sweep = client.post("/api/sweeps", json={"name": "down", "base": SPEC, "grid": {"seed": [1, 2]}})
            assert sweep.status_code == 201, sweep.text
            time.sleep(2 * pg_settings.dispatch_timeout_s)  # the dispatcher tries, and fails, meanwhile
            own_redis.start()
            _assert_all_ran(client, [run_id, *sweep.json()["run_ids"]])
    finally:
        worker.stop()


def test_messages_lost_by_a_killed_redis_are_sent_again(pg_settings, own_redis, tmp_path):
    with TestClient(create_app(pg_settings)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 50.0})
        ids = [client.post("/api/runs", json=SPEC | {"seed": seed}).json()["id"] for seed in range(3)]
        own_redis.kill()  # no worker yet: the three messages were only in its memory
        own_redis.start()
        worker = WorkerProcess(pg_settings, tmp_path / "worker.log")
        try:
            _assert_all_ran(client, ids)
        finally:
            worker.stop()


@pytest.mark.slow
def test_runs_an_api_never_sent_are_sent_once(settings, tmp_path):
    fast = settings.model_copy(update=FAST)
    if not fast.embedded:  # messages earlier tests of this session left in its Redis database
        redis.Redis.from_url(fast.broker_url).flushdb()
    celery = make_celery(fast)
    with TestClient(create_app(fast)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 50.0})
        ids = _queued_without_message(fast, 3)
        deadline = time.time() + 30
        while pending_runs(celery, fast) != set(ids) and time.time() < deadline:
            time.sleep(0.2)
        assert pending_runs(celery, fast) == set(ids)
        # a message waiting in the broker is not sent again, however long the backlog
        time.sleep(3 * fast.dispatch_timeout_s)
        assert _messages(fast) == 3
        worker = WorkerProcess(fast, tmp_path / "worker.log")
        try:
            _assert_all_ran(client, ids)
        finally:
            worker.stop()
    database = Database(fast.database_url)
    with database.session() as session:
        assert all(session.get(Run, run_id).dispatched_at is not None for run_id in ids)
    database.engine.dispose()


def _messages(settings) -> int:
    if settings.embedded:
        return len(list((settings.broker_folder / "queue").glob("*.msg")))
    return redis.Redis.from_url(settings.broker_url).llen("celery")


@pytest.mark.slow
def test_a_sweep_whose_api_was_killed_while_sending_leaves_no_run_stuck(pg_settings, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {
        "DPFL_HOME": str(pg_settings.home),
        "DPFL_DATABASE_URL": pg_settings.database_url,
        "DPFL_BROKER_URL": pg_settings.broker_url,
        "DPFL_DISPATCH_TIMEOUT_S": "600",  # this API must not repair its own loss
    }
    cmd = [sys.executable, "-m", "uvicorn", "backend.main:app", "--port", str(port), "--log-level", "warning"]
    api = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=(tmp_path / "api.log").open("w"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90  # the API process starts slowly on a loaded machine
        while True:
            try:
                httpx.put(f"{url}/api/budgets/digits", json={"total_epsilon": 2000.0}).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.time() < deadline, (tmp_path / "api.log").read_text()
                time.sleep(0.1)
        body = {"name": "killed", "base": SPEC, "grid": {"seed": list(range(500))}}
        threading.Thread(target=lambda: _post_quietly(f"{url}/api/sweeps", body), daemon=True).start()
        engine = create_engine(pg_settings.database_url)
        with engine.connect() as conn:  # kill it the moment its commit shows, while it sends
            while not conn.execute(text("SELECT count(*) FROM runs")).scalar():
                time.sleep(0.002)
        engine.dispose()
        os.kill(api.pid, signal.SIGKILL)
    finally:
        api.kill()
        api.wait()
    celery = make_celery(pg_settings)
    with TestClient(create_app(pg_settings)) as client:
        listed = client.get("/api/runs", params={"limit": 500}).json()["items"]
        ids = [r["id"] for r in listed]
        assert len(ids) == 500
        # the sweep's runs differ only in seed: they go in batches of 8, one message a batch
        batch_of = {r["id"]: r["batch_id"] for r in listed}
        assert len(set(batch_of.values())) == 63 and None not in batch_of.values()

        def unsent() -> set[str]:
            pending = pending_runs(celery, pg_settings)
            return {i for i in ids if i not in pending and batch_of[i] not in pending}

        lost = unsent()
        deadline = time.time() + 30
        while (missing := unsent()) and time.time() < deadline:
            time.sleep(0.5)
        assert not missing, f"{len(missing)} runs still without a message ({len(lost)} at the kill)"
        for run_id in ids:  # every reservation is refunded when they are cancelled
            assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        budget = client.get("/api/budgets/digits").json()
    assert (budget["reserved"], budget["spent"]) == (0, 0)


def _post_quietly(url: str, body: dict) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json=body, timeout=60)

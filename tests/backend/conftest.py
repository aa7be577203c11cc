"""Service fixtures: a real Postgres database and Redis broker (or SQLite and the filesystem
transport for the embedded mode), the app on them, and real Celery worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from backend import migrate
from backend.cli import worker_command
from backend.db import Database
from backend.main import create_app
from backend.settings import Settings
from worker import audit, execution
from worker.presence import Presence

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS = "redis://127.0.0.1:6379"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty Postgres database for this test session (dropped afterwards)."""
    name = f"dpfl_test_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at 127.0.0.1:5432 ({exc}); .ci/services.sh starts it")
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database index of its own for this session, emptied first. The processes of
    `make test` (pytest-xdist gw0, gw1, gw2) take indices of different residues mod 3."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    index = 1 + 3 * (os.getpid() % 5) + worker % 3
    client = redis.Redis.from_url(f"{REDIS}/{index}")
    try:
        client.flushdb()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is not reachable at 127.0.0.1:6379 ({exc}); .ci/services.sh starts it")
    return f"{REDIS}/{index}"


def make_settings(home: Path, database_url: str, broker_url: str = "", **extra) -> Settings:
    # Projections run in-process here (timeout 0): each app of a test would otherwise spawn its
    # own projection process and import torch again. tests/backend/privacy/test_bounds.py gives
    # a timeout, and the browser tests' `dpfl up` the default, so the bounded path is tested.
    return Settings(
        home=home,
        database_url=database_url,
        broker_url=broker_url,
        data_dir=os.environ.get("DPFL_DATA_DIR", ""),
        **({"projection_timeout_s": 0.0} | extra),
    )


def _truncate(database_url: str) -> None:
    engine = create_engine(database_url)
    with engine.begin() as conn:
        for table in (
            "audits",
            "round_metrics",
            "ledger_events",
            "budget_charges",
            "runs",
            "sweeps",
            "budgets",
            "workers",
        ):
            conn.execute(text(f"DELETE FROM {table}"))
    engine.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def settings(request, tmp_path) -> Settings:
    """Settings on Postgres + Redis, and on the embedded SQLite + filesystem transport."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        migrate.upgrade(url)
        _truncate(url)
        return make_settings(tmp_path, url, request.getfixturevalue("redis_url"))
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    return make_settings(tmp_path, url)


@pytest.fixture
def client(settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


class WorkerProcess:
    """A real `celery worker` process for the given settings."""

    def __init__(self, settings: Settings, log: Path, name: str = "w1", concurrency: int = 1):
        env = os.environ | {
            "DPFL_HOME": str(settings.home),
            "DPFL_DATABASE_URL": settings.database_url,
            "DPFL_BROKER_URL": settings.broker_url,
            "DPFL_DATA_DIR": settings.data_dir,
            "DPFL_TORCH_THREADS": str(settings.torch_threads),
            # the worker beats several times within the timeout the API reaps by
            "DPFL_HEARTBEAT_TIMEOUT_S": str(settings.heartbeat_timeout_s),
        }
        cmd = [*worker_command(concurrency), "--without-heartbeat", "-n", f"{name}@%h"]
        self.log = log
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.time() + 60
        while "ready." not in log.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Kills the worker and its pool. Tests end with it idle, and even a graceful cold
        shutdown takes seconds on the filesystem transport; the runs are on the database."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def worker(settings, tmp_path) -> Iterator[WorkerProcess]:
    w = WorkerProcess(settings, tmp_path / "worker.log")
    yield w
    w.stop()


def wait_until(
    client: TestClient, run_id: str, done: Callable[[dict], bool], timeout: float = 120, every: float = 0.25
) -> dict:
    """Polls the run until `done(body)`; fails with the run body otherwise."""
    deadline = time.time() + timeout
    body = {}
    while time.time() < deadline:
        body = client.get(f"/api/runs/{run_id}").json()
        if done(body):
            return body
        time.sleep(every)
    raise AssertionError(f"run {run_id} did not get there in {timeout} s: {body}")


def wait_for(client: TestClient, run_id: str, statuses: set[str], timeout: float = 120) -> dict:
    """Polls the run until its status is one of `statuses`; fails with the run body otherwise."""
    return wait_until(client, run_id, lambda body: body["status"] in statuses, timeout)


def run_here(settings: Settings, run_id: str) -> None:
    """Claims and runs a queued run in this process, as a worker would (no broker involved)."""
    database = Database(settings.database_url)
    try:
        assert execution.claim(database, run_id, worker="test")
        execution.execute(database, settings, run_id)
    finally:
        database.engine.dispose()


def audit_here(settings: Settings, audit_id: str) -> None:
    """Claims and runs a queued audit in this process, as a worker would (no broker involved)."""
    database = Database(settings.database_url)
    presence = Presence(database, "test")  # a worker beats while it works: the API fails it otherwise
    presence.start()
    try:
        assert audit.claim(database, audit_id, worker="test")
        audit.execute(database, settings, audit_id)
    finally:
        presence.stop()
        database.engine.dispose()

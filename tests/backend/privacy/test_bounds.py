"""Issue 17 item 3: projections are guarded like writes and bounded in parameters, time and memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from tests.factories import service_spec
from tests.server import ROOT, free_port

pytestmark = pytest.mark.service

PLD = {"delta": 1e-5, "accountant": "pld"}


def test_projection_needs_a_token_when_tokens_are_set(settings):
    guarded = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(guarded)) as c:
        assert c.post("/api/privacy/project", json=service_spec()).status_code == 401
        ok = c.post("/api/privacy/project", json=service_spec(), headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


@pytest.mark.parametrize("path", ["/api/privacy/project", "/api/runs"])
def test_pld_below_its_noise_floor_is_refused_naming_the_field(client, path):
    spec = service_spec(privacy={"noise_multiplier": 0.01, **PLD})
    t0 = time.monotonic()
    res = client.post(path, json=spec)
    assert res.status_code == 422, res.text
    (error,) = res.json()["detail"]
    assert error["loc"][-2:] == ["privacy", "noise_multiplier"]
    assert "0.01" in error["msg"] and "pld" in error["msg"] and "rdp" in error["msg"]
    assert time.monotonic() - t0 < 60  # refused before any accounting (was > 7 min and 4.5 GB)


def test_rounds_times_silos_beyond_the_limit_is_refused(settings):
    small = settings.model_copy(update={"max_party_rounds": 10})
    with TestClient(create_app(small)) as c:
        res = c.post("/api/privacy/project", json=service_spec(rounds=3))  # 3 × 4 silos
    assert res.status_code == 422
    (error,) = res.json()["detail"]
    assert error["loc"][-1] == "rounds" and "3 × 4 = 12" in error["msg"]


# The projection pool does not depend on the database: its tests run on the embedded one alone.
@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
def test_projection_beyond_the_time_limit_is_refused_naming_privacy(settings):
    hurried = settings.model_copy(update={"projection_timeout_s": 0.5, "projection_processes": 1})
    with TestClient(create_app(hurried)) as c:
        res = c.post("/api/privacy/project", json=service_spec(privacy={"noise_multiplier": 0.5, **PLD}))
        assert res.status_code == 422, res.text
        (error,) = res.json()["detail"]
        assert error["loc"][-1] == "privacy" and "longer than 0.5 s" in error["msg"]


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
def test_a_slow_projection_neither_blocks_nor_kills_another(settings):
    # two warm processes: a projection past the limit kills its own process only, and its
    # queue-mates are answered by the other process meanwhile (the limit counts computing)
    hurried = settings.model_copy(update={"projection_timeout_s": 4.0, "projection_processes": 2})
    slow = service_spec(rounds=20, privacy={"noise_multiplier": 0.3, **PLD})  # ~40 s of PLD
    with TestClient(create_app(hurried)) as c:
        answers: dict[str, httpx.Response] = {}
        request = threading.Thread(
            target=lambda: answers.update(slow=c.post("/api/privacy/project", json=slow))
        )
        request.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        fast = [c.post("/api/privacy/project", json=service_spec(privacy={"epsilon": e})) for e in (1.0, 2.0)]
        fast_s = time.monotonic() - t0
        request.join(timeout=60)
        after = c.post("/api/privacy/project", json=service_spec(privacy={"epsilon": 3.0}))
    assert [r.status_code for r in fast] == [200, 200] and fast_s < 4.0, [r.text for r in fast]
    assert answers["slow"].status_code == 422
    assert "longer than 4 s" in answers["slow"].json()["detail"][0]["msg"]
    assert after.status_code == 200, after.text  # not 503: the kill took no one else's answer


def stamp(seconds: float) -> int:
    """Returns the time it finished sleeping, in nanoseconds: one computation, one stamp."""
    time.sleep(seconds)
    return time.time_ns()


def test_identical_projections_in_flight_share_one_answer():
    # in-process (a timeout of 0, as the command line projects): the same sharing as in the pool
    from backend.privacy import bounded

    answers = []

    def ask(seconds: float) -> None:
        answers.append(bounded.call(stamp, seconds, timeout_s=0, memory_bytes=0))

    threads = [threading.Thread(target=ask, args=(s,)) for s in (1.0, 1.0, 1.5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(answers) == 3
    assert len(set(answers)) == 2  # the two identical calls got one computation's answer


@pytest.mark.slow
def test_sigterm_stops_the_server_during_a_slow_projection(tmp_path):
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPFL_") or k == "DPFL_DATA_DIR"}
    env |= {"DPFL_HOME": str(tmp_path), "DPFL_DATABASE_URL": url, "DPFL_PROJECTION_TIMEOUT_S": "600"}
    cmd = [sys.executable, "-m", "uvicorn", "backend.main:app", "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp_path / "uvicorn.log").open("w")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "uvicorn.log").read_text()
            try:
                if httpx.get(f"{base}/api/runs", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        answers: list[int] = []
        slow = service_spec(rounds=20, privacy={"noise_multiplier": 0.3, **PLD})  # ~40 s of PLD
        request = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{base}/api/privacy/project", json=slow, timeout=300).status_code
            ),
            daemon=True,
        )
        request.start()
        time.sleep(8)  # the projection process is up and accounting
        assert not answers, answers
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        assert time.monotonic() - t0 < 8
        request.join(timeout=5)
        assert answers in ([503], [])  # answered "shutting down", or the connection was closed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()

"""End to end with real worker processes: Postgres + Redis, and the embedded SQLite + filesystem mode."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from backend.main import create_app
from backend.runs.service import requeue_stale
from dpfl.runner import run as run_locally
from dpfl.spec import parse_spec
from tests.backend.conftest import WorkerProcess, wait_for
from tests.factories import service_spec
from worker import execution

pytestmark = pytest.mark.service

SPEC = service_spec(rounds=6, eval_every=2, privacy={"noise_multiplier": 1.5, "delta": 1e-5})


def test_run_completes_and_its_ledger_matches_the_runner(client, worker):
    client.put("/api/budgets/digits", json={"total_epsilon": 50.0})
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    body = wait_for(client, run_id, {"succeeded", "failed"})
    assert body["status"] == "succeeded", body["error"]
    assert (body["progress"], body["current_round"], body["attempts"]) == (1.0, 6, 1)
    assert body["worker"].startswith("w1@")
    local = run_locally(parse_spec(SPEC))
    assert body["epsilon"] == pytest.approx(local.epsilon, rel=1e-12)
    # digits has a budget: the worker's noise comes from OS entropy, not the spec's seed. The test
    # loss shows it (continuous); the accuracy, a count over 359 images of a model six noisy rounds
    # old, once came out the same (0.2507 both).
    assert body["protected"] is True and body["final_loss"] != pytest.approx(local.final.loss, rel=1e-9)
    metrics = client.get(f"/api/runs/{run_id}/metrics").json()
    assert [m["round"] for m in metrics] == [2, 4, 6]
    assert metrics[-1]["epsilon"] == pytest.approx(local.epsilon)
    ledger = client.get(f"/api/runs/{run_id}/ledger").json()
    assert ledger["epsilon"] == pytest.approx(local.epsilon, rel=1e-12)
    assert len(ledger["events"]) == 6 * 4
    pld = client.get(f"/api/runs/{run_id}/ledger", params={"accountant": "pld"}).json()
    assert pld["accountant"] == "pld" and pld["epsilon"] < ledger["epsilon"]
    budget = client.get("/api/budgets/digits").json()
    assert budget["spent"] == pytest.approx(local.epsilon) and budget["reserved"] == 0


@pytest.mark.parametrize(("concurrency", "torch_threads"), [(2, 0), (1, 1)])
def test_runs_side_by_side_split_the_cores(client, settings, tmp_path, concurrency, torch_threads):
    # torch takes every core by default; two runs at once would oversubscribe them
    cores = len(os.sched_getaffinity(0))
    expected = torch_threads or max(1, cores // concurrency)
    worker = WorkerProcess(
        settings.model_copy(update={"torch_threads": torch_threads}),
        tmp_path / "worker.log",
        concurrency=concurrency,
    )
    try:
        ids = [client.post("/api/runs", json=SPEC | {"seed": seed}).json()["id"] for seed in (1, 2)]
        bodies = [wait_for(client, run_id, {"succeeded", "failed"}) for run_id in ids]
    finally:
        worker.stop()
    assert [b["status"] for b in bodies] == ["succeeded"] * 2
    assert [b["timings"]["threads"] for b in bodies] == [expected] * 2
    assert set(bodies[0]["timings"]) == {"setup_s", "train_s", "eval_s", "total_s", "threads", "batch_runs"}
    assert bodies[0]["timings"]["batch_runs"] == 1  # single runs train alone
    assert bodies[0]["timings"]["total_s"] >= bodies[0]["timings"]["train_s"] > 0


def test_cancel_is_honoured_between_rounds(client, worker):
    spec = SPEC | {"rounds": 400, "eval_every": 1}
    client.put("/api/budgets/digits", json={"total_epsilon": 1000.0})
    run_id = client.post("/api/runs", json=spec).json()["id"]
    deadline = time.time() + 60
    while client.get(f"/api/runs/{run_id}").json()["current_round"] < 3 and time.time() < deadline:
        time.sleep(0.1)
    assert client.post(f"/api/runs/{run_id}/cancel").json()["cancel_requested"] is True
    body = wait_for(client, run_id, {"cancelled", "succeeded", "failed"})
    assert body["status"] == "cancelled"
    done = body["current_round"]
    assert 3 <= done < 400
    assert len(client.get(f"/api/runs/{run_id}/metrics").json()) == done  # finished rounds are kept
    charged = client.get("/api/budgets/digits").json()["charges"][0]
    assert charged["settled"] and 0 < charged["spent"] == pytest.approx(body["epsilon"])


def test_a_failing_run_records_its_error_and_refunds(client, settings, tmp_path):
    table = "a,b,y\n" + "".join(f"{i % 7},{i % 3},{i % 2}\n" for i in range(40))
    upload = client.post(
        "/api/datasets", files={"file": ("t.csv", table)}, data={"name": "ward", "label": "y"}
    )
    assert upload.status_code == 201
    client.put("/api/budgets/ward", json={"total_epsilon": 5.0})
    data = tmp_path / "data"  # a data folder of the server's: a file of the same bytes is ward's records
    data.mkdir()
    settings.data_dir = f"{data}{os.pathsep}{settings.data_dir}"  # the client's app holds this object
    path = data / "gone.csv"  # there at submission, removed before the run starts
    path.write_text(table)
    spec = SPEC | {
        "dataset": {
            "name": "csv",
            "silos": 2,
            "options": {"path": str(path), "label": "y", "standardise": "none"},
        },
        "privacy": {"epsilon": 1.0, "delta": 1e-5},
    }
    res = client.post("/api/runs", json=spec)
    assert res.status_code == 201, res.text
    assert client.get("/api/budgets/ward").json()["reserved"] == 1.0  # at admission
    path.unlink()
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    try:
        body = wait_for(client, res.json()["id"], {"succeeded", "failed"})
    finally:
        worker.stop()
    assert body["status"] == "failed"
    assert body["error"] == (
        f"`dataset.path` names no file; got {str(path)!r}. Give the path of an existing CSV file."
    )
    assert client.get("/api/budgets/ward").json()["remaining"] == 5.0  # nothing was released


def test_a_slow_worker_whose_run_was_requeued_and_reclaimed_writes_nothing_more_and_stops(client, settings):
    run_id = client.post("/api/runs", json=SPEC | {"rounds": 300, "eval_every": 1}).json()["id"]
    database = Database(settings.database_url)
    try:
        assert execution.claim(database, run_id, worker="slow")
        slow = threading.Thread(target=execution.execute, args=(database, settings, run_id))
        slow.start()
        deadline = time.time() + 60
        while client.get(f"/api/runs/{run_id}").json()["current_round"] < 2 and time.time() < deadline:
            time.sleep(0.05)
        # its heartbeat counts as stale: the reaper re-queues the run and another worker claims it
        # (the reaper skips a row while a round's write holds it, so it may take a few tries)
        stale = settings.model_copy(update={"heartbeat_timeout_s": 1e-9})
        requeued = []
        while not requeued and time.time() < deadline:
            with database.session() as session:
                requeued = requeue_stale(session, settings=stale)
        assert requeued == [run_id]
        assert execution.claim(database, run_id, worker="second")
        slow.join(timeout=60)
        assert not slow.is_alive()  # it stopped at its next round, 300 rounds from its end
    finally:
        database.engine.dispose()
    body = client.get(f"/api/runs/{run_id}").json()
    assert (body["status"], body["worker"], body["attempts"]) == ("preparing", "second", 2)
    assert (body["current_round"], body["progress"], body["finished_at"]) == (0, 0.0, None)
    assert len(client.get(f"/api/runs/{run_id}/metrics").json()) < 300  # it stopped, not trained to its end


@pytest.mark.slow
def test_killed_worker_leaves_the_run_requeued_and_finished_by_another(settings, tmp_path):
    # Short, but not so short that a live worker is taken for dead on a loaded machine (at 3 s,
    # with workers that beat every 5 s, CI twice saw the second worker's run re-queued: a third
    # attempt; the workers now get the API's timeout and beat at a quarter of it).
    fast = settings.model_copy(update={"heartbeat_timeout_s": 10.0})
    first = WorkerProcess(fast, tmp_path / "w1.log", name="w1")
    with TestClient(create_app(fast)) as client:
        # long enough that it cannot finish between the poll that sees round 2 and the kill (a
        # round writes its metrics: tens of ms), short enough that the second worker's re-run
        # does not weigh on the suite (300 rounds: 14–17 s of CPU for the second worker in `make test`)
        run_id = client.post("/api/runs", json=SPEC | {"rounds": 100, "eval_every": 1}).json()["id"]
        deadline = time.time() + 60
        while client.get(f"/api/runs/{run_id}").json()["current_round"] < 2 and time.time() < deadline:
            time.sleep(0.1)
        os.killpg(first.proc.pid, signal.SIGKILL)  # the whole worker, parent and child, at once
        first.proc.wait(timeout=10)
        # not failed: the reaper may already have re-queued it if the last heartbeat is over 10 s
        # old by now
        assert client.get(f"/api/runs/{run_id}").json()["status"] in {"running", "queued"}
        queued = wait_for(client, run_id, {"queued"}, timeout=60)  # the reaper, after 10 s of silence
        assert (queued["current_round"], queued["progress"]) == (0, 0.0)  # not the lost attempt's
        second = WorkerProcess(fast, tmp_path / "w2.log", name="w2")
        try:
            body = wait_for(client, run_id, {"succeeded", "failed"}, timeout=180)
        finally:
            second.stop()
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()
        ledger = client.get(f"/api/runs/{run_id}/ledger").json()
    assert body["status"] == "succeeded", body["error"]
    assert body["attempts"] == 2 and body["worker"].startswith("w2@")
    assert [m["round"] for m in metrics] == list(range(1, 101))  # the re-run wrote nothing twice
    assert len(ledger["events"]) == 100 * 4


@pytest.mark.slow
def test_a_protected_run_killed_mid_run_ends_failed_and_charged_what_it_released(settings, tmp_path):
    fast = settings.model_copy(update={"heartbeat_timeout_s": 10.0})
    worker = WorkerProcess(fast, tmp_path / "w1.log", name="w1")
    with TestClient(create_app(fast)) as client:
        client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
        spec = SPEC | {"rounds": 100, "eval_every": 1, "privacy": {"epsilon": 4.0, "delta": 1e-5}}
        run_id = client.post("/api/runs", json=spec).json()["id"]
        deadline = time.time() + 60
        while client.get(f"/api/runs/{run_id}").json()["current_round"] < 2 and time.time() < deadline:
            time.sleep(0.1)
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(timeout=10)
        body = wait_for(client, run_id, {"failed", "queued"}, timeout=60)  # the reaper, after 10 s
        ledger = client.get(f"/api/runs/{run_id}/ledger").json()
        budget = client.get("/api/budgets/digits").json()
    assert body["status"] == "failed" and body["attempts"] == 1, body
    assert body["error"].startswith(f"worker lost after round {body['current_round']} (last: w1@")
    rounds = {e["round"] for e in ledger["events"]}
    assert min(rounds) == 1 and len(rounds) >= 2  # the releases it made before the kill, kept
    assert 0 < ledger["epsilon"] < 4.0
    assert body["epsilon"] == pytest.approx(ledger["epsilon"], rel=1e-12)
    assert budget["spent"] == pytest.approx(ledger["epsilon"]) and budget["reserved"] == 0.0

"""GET /api/events: run status and progress as Server-Sent Events, with real workers and resumption."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.backend.conftest import wait_for
from tests.factories import service_spec

pytestmark = pytest.mark.service

SPEC = service_spec(rounds=5, privacy={"noise_multiplier": 1.5, "delta": 1e-5})


def events(response, *, until: set[str] = frozenset()):
    """Yields (id, event, data) for each event of the stream; stops after one whose status is in `until`."""
    block: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if line:
            key, _, value = line.partition(": ")
            block[key] = value
            continue
        if block:
            data = json.loads(block["data"])
            yield block["id"], block["event"], data
            if data.get("status") in until:  # a snapshot has no status
                return
        block = {}


def test_stream_follows_a_run_to_success(client, worker):
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    with client.stream("GET", f"/api/events?run={run_id}&timeout=60") as res:
        assert res.status_code == 200
        assert res.headers["content-type"] == "text/event-stream; charset=utf-8"
        seen = list(events(res, until={"succeeded", "failed", "cancelled"}))
    assert {(kind, data["id"]) for _, kind, data in seen} == {("run", run_id)}
    last = seen[-1][2]
    assert last["status"] == "succeeded", last["error"]
    progress = [data["progress"] for _, _, data in seen]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert (last["current_round"], last["rounds"], last["sweep_id"], last["error"]) == (5, 5, None, None)
    assert last["epsilon"] == client.get(f"/api/runs/{run_id}").json()["epsilon"] > 0
    assert 0 <= last["final_accuracy"] <= 1
    assert seen[0][2]["status"] in {"queued", "preparing", "running"}  # the snapshot came before the end
    times = [dt.datetime.fromisoformat(event_id) for event_id, _, _ in seen]
    assert times == sorted(times)
    assert wait_for(client, run_id, {"succeeded"})["progress"] == 1.0


def test_snapshot_then_each_change_then_resumption(client):
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    with client.stream("GET", f"/api/events?run={run_id}&timeout=30") as res:
        stream = events(res, until={"cancelled"})
        first = next(stream)
        assert first[2] == {
            "id": run_id,
            "status": "queued",
            "progress": 0.0,
            "current_round": 0,
            "rounds": 5,
            "epsilon": None,
            "final_accuracy": None,
            "final_balanced_accuracy": None,
            "sweep_id": None,
            "error": None,
        }
        assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200
        rest = list(stream)
    assert [data["status"] for _, _, data in rest] == ["cancelled"]
    cancelled_id = rest[0][0]

    # A reconnecting client sends the last id it saw and gets only what came after it.
    with client.stream(
        "GET", f"/api/events?run={run_id}&timeout=1", headers={"Last-Event-ID": first[0]}
    ) as res:
        assert [(i, d["status"]) for i, _, d in events(res)] == [(cancelled_id, "cancelled")]
    start = time.monotonic()
    with client.stream("GET", f"/api/events?run={run_id}&timeout=1&since={cancelled_id}") as res:
        assert list(events(res)) == []
    assert time.monotonic() - start < 10  # the timeout closed the stream


def snapshot_runs(data: dict) -> list[dict]:
    return [dict(zip(data["columns"], row, strict=True)) for row in data["runs"]]


def test_unfiltered_stream_starts_with_the_active_runs(client):
    done = client.post("/api/runs", json=SPEC).json()["id"]
    client.post(f"/api/runs/{done}/cancel")
    since = dt.datetime.now(dt.UTC).isoformat()
    queued = client.post("/api/runs", json=SPEC).json()["id"]
    with client.stream("GET", "/api/events?timeout=30") as res:
        _, kind, data = next(events(res))
        assert (kind, [r["id"] for r in snapshot_runs(data)]) == ("snapshot", [queued])
    with client.stream("GET", "/api/events", params={"since": since, "timeout": 1}) as res:
        assert [d["id"] for _, _, d in events(res)] == [queued]


def test_bad_requests(client):
    res = client.get("/api/events", params={"since": "yesterday"})
    assert res.status_code == 422
    assert res.json()["detail"] == [
        {
            "loc": ["query", "since"],
            "msg": "must be an ISO 8601 timestamp such as 2025-01-31T12:00:00+00:00; got 'yesterday'.",
            "type": "value_error",
        }
    ]
    assert client.get("/api/events?run=nope").json() == {
        "detail": "run 'nope' does not exist",
        "error": "NotFound",
    }
    assert client.get("/api/events?sweep=nope").status_code == 404


COLUMNS = [
    "id",
    "status",
    "progress",
    "current_round",
    "rounds",
    "epsilon",
    "final_accuracy",
    "final_balanced_accuracy",
    "sweep_id",
    "error",
]


def browser_snapshot_runs(data: dict, tmp_path: Path) -> list[dict]:
    """What frontend/js/api.js's snapshotRuns makes of a snapshot event's data (run by node)."""
    module = tmp_path / "api.mjs"  # an ES module by its name, without a package.json
    module.write_text((Path(__file__).resolve().parents[3] / "frontend/js/api.js").read_text())
    script = (
        f"import {{ snapshotRuns }} from {json.dumps(module.as_uri())};"
        f"console.log(JSON.stringify(snapshotRuns({json.dumps(data)})));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout)


def test_a_new_stream_starts_with_one_compact_snapshot_the_browser_reads_as_run_events(client, tmp_path):
    queued = client.post("/api/runs", json=SPEC).json()["id"]
    cancelled = client.post("/api/runs", json=SPEC).json()["id"]
    client.post(f"/api/runs/{cancelled}/cancel")
    with client.stream("GET", "/api/events?timeout=1") as res:
        seen = list(events(res))
    # then only what changed within the look-back: the run cancelled just before
    assert [(kind, d.get("id")) for _, kind, d in seen] in (
        [("snapshot", None)],
        [("snapshot", None), ("run", cancelled)],
    )
    event_id, _, data = seen[0]
    assert set(data) == {"columns", "runs"} and data["columns"] == COLUMNS
    with client.stream("GET", f"/api/events?run={queued}&timeout=1") as res:
        [(run_id, kind, run)] = list(events(res))
    assert kind == "run" and snapshot_runs(data) == [run]  # the same data as the run's own event
    assert dt.datetime.fromisoformat(event_id) >= dt.datetime.fromisoformat(run_id)
    if shutil.which("node"):
        assert browser_snapshot_runs(data, tmp_path) == [run]

    # a sweep's stream starts from all its runs, finished or not
    sweep = client.post("/api/sweeps", json={"base": SPEC, "grid": {"seed": [0, 1]}}).json()
    client.post(f"/api/runs/{sweep['run_ids'][0]}/cancel")
    with client.stream("GET", f"/api/events?sweep={sweep['id']}&timeout=1") as res:
        [(_, kind, data)] = list(events(res))
    assert kind == "snapshot"
    assert sorted((r["id"], r["status"], r["sweep_id"]) for r in snapshot_runs(data)) == sorted(
        [(sweep["run_ids"][0], "cancelled", sweep["id"]), (sweep["run_ids"][1], "queued", sweep["id"])]
    )

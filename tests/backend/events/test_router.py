"""GET /api/events: run status and progress as Server-Sent Events, with real workers and resumption."""

from __future__ import annotations

import datetime as dt
import json
import time

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
            if data["status"] in until:
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
    assert seen[0][2]["status"] in {"queued", "running"}  # the snapshot came before the end
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


def test_unfiltered_stream_starts_with_the_active_runs(client):
    done = client.post("/api/runs", json=SPEC).json()["id"]
    client.post(f"/api/runs/{done}/cancel")
    since = dt.datetime.now(dt.UTC).isoformat()
    queued = client.post("/api/runs", json=SPEC).json()["id"]
    with client.stream("GET", "/api/events?timeout=30") as res:
        assert next(events(res))[2]["id"] == queued
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

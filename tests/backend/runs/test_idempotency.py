"""Submit once (issue 38): a POST retried with its `Idempotency-Key` creates one run."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 2},
    "model": {"name": "logreg"},
    "rounds": 2,
    "privacy": {"epsilon": 2.0},
}


def test_a_retried_post_with_one_key_creates_one_run(client):
    headers = {"Idempotency-Key": "form-7f3a"}
    first = client.post("/api/runs", json=SPEC, headers=headers)
    again = client.post("/api/runs", json=SPEC, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] == first.json()["id"]
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    other = client.post("/api/runs", json=SPEC, headers={"Idempotency-Key": "form-7f3b"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    assert client.post("/api/runs", json=SPEC).json()["id"] not in (first.json()["id"], other.json()["id"])
    assert client.get("/api/runs").json()["total"] == 3


def test_a_key_sent_with_another_spec_is_422_naming_the_header(client):
    headers = {"Idempotency-Key": "k1"}
    assert client.post("/api/runs", json=SPEC, headers=headers).status_code == 201
    res = client.post("/api/runs", json=SPEC | {"rounds": 3}, headers=headers)
    assert res.status_code == 422
    (error,) = res.json()["detail"]
    assert error["loc"] == ["header", "Idempotency-Key"]
    assert error["msg"].startswith("was used for run ")
    assert error["msg"].endswith("with another spec; a retry must send the same spec, a new run a new key.")
    assert client.get("/api/runs").json()["total"] == 1


def test_a_double_click_sends_two_posts_at_once_and_gets_one_run(client):
    answers = []

    def post():
        answers.append(client.post("/api/runs", json=SPEC, headers={"Idempotency-Key": "double"}))

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert client.get("/api/runs").json()["total"] == 1
    # one reservation, not two
    (run,) = client.get("/api/runs").json()["items"]
    assert run["projected_epsilon"] <= 2.0

"""The runs API against a real database (Postgres and SQLite), no worker: status codes and bodies."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from dpfl.algorithms import registered_algorithms
from tests.factories import service_spec

pytestmark = pytest.mark.service

DIGITS = service_spec()


def submit(client, spec=DIGITS, **headers):
    return client.post("/api/runs", json=spec, headers=headers)


def test_submit_returns_201_with_the_queued_run(client):
    res = submit(client)
    assert res.status_code == 201
    body = res.json()
    assert body["status"] == "queued"
    assert (body["algorithm"], body["dataset"], body["notion"]) == ("isrl_mbsgd", "digits", "record")
    assert (body["target_epsilon"], body["delta"]) == (2.0, 1e-5)
    # the σ calibrated at admission, as its worker calibrates it, meets the target from below
    assert 2.0 * 0.99 < body["projected_epsilon"] <= 2.0
    assert client.get(f"/api/runs/{body['id']}").json()["id"] == body["id"]
    assert client.get(f"/api/runs/{body['id']}/spec").json()["rounds"] == 3


def test_noise_multiplier_run_is_projected_from_its_plan(client):
    spec = DIGITS | {"privacy": {"noise_multiplier": 2.0, "delta": 1e-5}}
    body = submit(client, spec).json()
    assert body["noise_multiplier"] == 2.0
    assert 0 < body["projected_epsilon"] < 10


@pytest.mark.parametrize(
    ("change", "loc", "msg"),
    [
        ({"rounds": 0}, ["body", "rounds"], "input should be greater than or equal to 1; got 0."),
        (
            {"privacy": {"epsilon": 2.0, "delta": 2}},
            ["body", "privacy", "delta"],
            "input should be less than 1; got 2.",
        ),
        ({"params": {"lr": -1}}, ["body", "params", "lr"], "input should be greater than 0; got -1."),
        (
            {"algorithm": "nope"},
            ["body", "algorithm"],
            "unknown algorithm 'nope'; registered: " + ", ".join(registered_algorithms()),
        ),
        ({"rounds": 5000}, ["body", "rounds"], "must be ≤ 2000 on this server; got 5000."),
        ({"colour": "red"}, ["body", "colour"], "is not a known field."),
    ],
)
def test_bad_field_is_422_naming_it(client, change, loc, msg):
    res = submit(client, DIGITS | change)
    assert res.status_code == 422
    assert res.json()["detail"] == [{"loc": loc, "msg": msg, "type": "value_error"}]


def test_unknown_run_is_404(client):
    for method, path in (
        ("get", "/api/runs/nope"),
        ("post", "/api/runs/nope/cancel"),
        ("delete", "/api/runs/nope"),
        ("get", "/api/runs/nope/metrics"),
        ("get", "/api/runs/nope/ledger"),
    ):
        res = client.request(method.upper(), path)
        assert res.status_code == 404, path
        assert res.json() == {"detail": "run 'nope' does not exist", "error": "NotFound"}


def test_cancel_queued_run_then_delete_it(client):
    run_id = submit(client).json()["id"]
    res = client.delete(f"/api/runs/{run_id}")
    assert res.status_code == 409
    assert res.json()["detail"].startswith(f"run '{run_id}' is queued; cancel it")
    assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 409
    assert client.delete(f"/api/runs/{run_id}").status_code == 204
    assert client.get(f"/api/runs/{run_id}").status_code == 404


def test_list_filters_sorts_and_pages(client):
    ids = [
        submit(client, DIGITS | {"privacy": {"epsilon": e, "delta": 1e-5}}).json()["id"] for e in (1, 4, 2)
    ]
    fed = submit(
        client, {"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 4}, "rounds": 2}
    ).json()
    page = client.get(
        "/api/runs", params={"algorithm": "isrl_mbsgd", "sort": "target_epsilon", "limit": 2}
    ).json()
    assert page["total"] == 3 and page["next_offset"] == 2
    assert [r["target_epsilon"] for r in page["items"]] == [1.0, 2.0]
    rest = client.get(
        "/api/runs", params={"algorithm": "isrl_mbsgd", "sort": "target_epsilon", "limit": 2, "offset": 2}
    ).json()
    assert [r["id"] for r in rest["items"]] == [ids[1]] and rest["next_offset"] is None
    assert client.get("/api/runs", params={"algorithm": "fedavg"}).json()["items"][0]["id"] == fed["id"]
    bad = client.get("/api/runs", params={"sort": "colour"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["query", "sort"]


def test_budget_refuses_overspend_with_409(client):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 5.0}).status_code == 200
    assert submit(client, DIGITS | {"privacy": {"epsilon": 3.0, "delta": 1e-5}}).status_code == 201
    res = submit(client, DIGITS | {"privacy": {"epsilon": 3.0, "delta": 1e-5}})
    assert res.status_code == 409
    assert res.json() == {
        "detail": "dataset 'digits' has ε 2 left of 5; this run needs 3",
        "error": "BudgetExceeded",
    }
    budget = client.get("/api/budgets/digits").json()
    assert (budget["reserved"], budget["spent"], budget["remaining"]) == (3.0, 0.0, 2.0)


def test_cancelling_a_queued_run_refunds_its_reservation(client):
    client.put("/api/budgets/digits", json={"total_epsilon": 5.0})
    run_id = submit(client, DIGITS | {"privacy": {"epsilon": 4.0, "delta": 1e-5}}).json()["id"]
    client.post(f"/api/runs/{run_id}/cancel")
    assert client.get("/api/budgets/digits").json()["remaining"] == 5.0


def test_writes_need_a_token_when_tokens_are_set(settings, tmp_path):
    guarded = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(guarded)) as c:
        assert submit(c).status_code == 401
        assert submit(c, Authorization="Bearer wrong").status_code == 401
        assert submit(c, Authorization="Bearer s3cret").status_code == 201
        assert c.get("/api/runs").status_code == 200  # reads stay open

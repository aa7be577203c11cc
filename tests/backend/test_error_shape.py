"""Every error body the API returns has the same shape: {"detail", "error"} (Datasette's test_error_shape)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "privacy": {"epsilon": 3.0, "delta": 1e-5},
}
CSV = b"x1,x2,y\n" + b"".join(f"{i},{i % 7},{i % 2}\n".encode() for i in range(200))
FIELD_ERRORS = {"SpecError", "UnknownNameError"}  # 422 with FastAPI's [{loc, msg, type}] detail


def assert_shape(res, status: int, error: str) -> None:
    assert res.status_code == status, res.text
    body = res.json()
    assert set(body) == {"detail", "error"} and body["error"] == error, body
    if error in FIELD_ERRORS:
        assert body["detail"] and all(set(item) == {"loc", "msg", "type"} for item in body["detail"]), body
        assert all(
            item["loc"][0] in {"body", "query", "path", "header"} and isinstance(item["msg"], str)
            for item in body["detail"]
        )
    else:
        assert isinstance(body["detail"], str) and body["detail"], body


def upload(client, body: bytes, name: str = "table", label: str = "y", **headers):
    return client.post(
        "/api/datasets", files={"file": ("t.csv", body)}, data={"name": name, "label": label}, headers=headers
    )


def test_every_error_body_has_detail_and_error(client, settings):
    assert_shape(client.get("/api/runs/nope"), 404, "NotFound")
    assert_shape(client.get("/api/budgets/nowhere"), 404, "NotFound")
    assert_shape(client.get("/api/events?run=nope"), 404, "NotFound")
    client.put("/api/budgets/digits", json={"total_epsilon": 1.0})
    assert_shape(client.post("/api/runs", json=SPEC), 409, "BudgetExceeded")
    # a non-private run on a dataset with a budget is refused
    assert_shape(
        client.post("/api/runs", json=SPEC | {"algorithm": "fedavg", "privacy": None}), 409, "Conflict"
    )
    other = {"name": "breast_cancer", "silos": 2}
    run_id = client.post(
        "/api/runs", json=SPEC | {"algorithm": "fedavg", "privacy": None, "dataset": other}
    ).json()["id"]
    assert_shape(client.delete(f"/api/runs/{run_id}"), 409, "Conflict")
    assert_shape(client.post("/api/runs", json=SPEC | {"rounds": 0}), 422, "SpecError")
    assert_shape(client.post("/api/runs", json=SPEC | {"algorithm": "nope"}), 422, "UnknownNameError")
    assert_shape(client.post("/api/privacy/project", json=SPEC | {"colour": "red"}), 422, "SpecError")
    assert_shape(client.get("/api/events?since=yesterday"), 422, "SpecError")
    assert_shape(upload(client, CSV, label="target"), 422, "SpecError")
    assert upload(client, CSV).status_code == 201
    assert_shape(upload(client, CSV), 409, "Conflict")

    strict = settings.model_copy(update={"api_tokens": "s3cret", "max_upload_bytes": 1000, "data_dir": ""})
    with TestClient(create_app(strict)) as c:
        assert_shape(c.post("/api/runs", json=SPEC), 401, "Unauthorized")
        assert_shape(
            c.post("/api/runs", json=SPEC, headers={"Authorization": "Bearer wrong"}), 401, "Unauthorized"
        )
        assert_shape(upload(c, CSV, Authorization="Bearer s3cret"), 413, "PayloadTooLarge")
        mnist = SPEC | {"dataset": {"name": "mnist", "silos": 4}}
        assert_shape(
            c.post("/api/privacy/project", json=mnist, headers={"Authorization": "Bearer s3cret"}),
            422,
            "DatasetUnavailable",
        )


def test_framework_errors_have_detail_and_error(client):
    res = client.get("/api/runs?limit=0")
    assert res.status_code == 422
    assert res.json()["error"] == "RequestValidationError"
    assert res.json()["detail"][0]["loc"] == ["query", "limit"]
    missing = client.get("/api/no-such-thing")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Not Found", "error": "HTTPException"}

"""Writes need a bearer token when DPFL_API_TOKENS is set: 401 with `WWW-Authenticate: Bearer`."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from backend.main import create_app

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "privacy": {"epsilon": 3.0, "delta": 1e-5},
}
MISSING = "this server requires a bearer token for writes: send 'Authorization: Bearer <token>'"
WRONG = "the bearer token is not one of this server's tokens"


@pytest.fixture
def strict(settings):
    with TestClient(create_app(settings.model_copy(update={"api_tokens": "s3cret,other"}))) as c:
        yield c


@pytest.mark.parametrize(
    ("headers", "detail"),
    [
        ({}, MISSING),
        ({"Authorization": "Basic czNjcmV0"}, MISSING),
        ({"Authorization": "Bearer"}, MISSING),
        ({"Authorization": "Bearer wrong"}, WRONG),
        ({"Authorization": "Bearer s3cre"}, WRONG),
    ],
)
def test_a_write_without_a_valid_token_is_401_with_the_challenge(strict, headers, detail):
    res = strict.post("/api/runs", json=SPEC, headers=headers)
    assert res.status_code == 401
    assert res.headers["www-authenticate"] == "Bearer"
    assert res.json() == {"detail": detail, "error": "Unauthorized"}


def test_a_valid_token_writes_and_reads_stay_open(strict):
    assert strict.post("/api/runs", json=SPEC, headers={"Authorization": "Bearer other"}).status_code == 201
    assert strict.get("/api/runs").status_code == 200


def test_every_guarded_route_documents_401_in_openapi(strict):
    schema = strict.get("/openapi.json").json()
    guarded = {
        (method.upper(), path)
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if "401" in op["responses"]
    }
    assert guarded == {
        ("POST", "/api/runs"),
        ("POST", "/api/runs/{run_id}/cancel"),
        ("POST", "/api/runs/{run_id}/rounds"),
        ("POST", "/api/runs/{run_id}/finish"),
        ("POST", "/api/runs/import"),
        ("DELETE", "/api/runs/{run_id}"),
        ("PATCH", "/api/runs/{run_id}"),
        ("PATCH", "/api/sweeps/{sweep_id}"),
        ("DELETE", "/api/sweeps/{sweep_id}"),
        ("POST", "/api/runs/{run_id}/audit"),
        ("PUT", "/api/budgets/{dataset}"),
        ("DELETE", "/api/budgets/{dataset}"),
        ("POST", "/api/privacy/project"),  # an expensive computation, guarded like a write
        ("POST", "/api/sweeps"),
        ("POST", "/api/datasets"),
    }
    for method, path in guarded:
        doc = schema["paths"][path][method.lower()]["responses"]["401"]
        assert doc["headers"] == {
            "WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}
        }
        assert "DPFL_API_TOKENS" in doc["description"]
    assert not any("403" in op["responses"] for ops in schema["paths"].values() for op in ops.values())


def test_a_write_without_tokens_over_a_network_address_is_401(settings):
    """A server bound beyond loopback some other way than `dpfl up` (uvicorn --host 0.0.0.0)."""
    with TestClient(create_app(settings), base_url="http://192.168.1.7:8000") as remote:
        res = remote.post("/api/runs", json={"algorithm": "fedavg"})
        assert res.status_code == 401 and res.headers["www-authenticate"] == "Bearer"
        assert res.json()["detail"] == (
            "this server has no tokens, so it takes writes only over loopback; this request came in on "
            "192.168.1.7: set DPFL_API_TOKENS (and send 'Authorization: Bearer <token>') or use 127.0.0.1"
        )
        assert remote.get("/api/runs").status_code == 200  # reads stay open
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as local:
        assert local.post("/api/runs", json={"algorithm": "nope"}).status_code == 422


def test_a_write_without_tokens_over_a_unix_socket_is_401(settings, tmp_path):
    """`uvicorn --uds`, the usual set-up behind a reverse proxy: the connection has no address, and
    whatever the proxy forwards (any network) arrives on it, so it is not loopback."""
    path = str(tmp_path / "dpfl.sock")
    server = uvicorn.Server(uvicorn.Config(create_app(settings), uds=path, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        with httpx.Client(transport=httpx.HTTPTransport(uds=path), base_url="http://dpfl") as http:
            res = http.put("/api/budgets/digits", json={"total_epsilon": 1.0})
            assert res.status_code == 401, res.text
            assert res.json()["detail"] == (
                "this server has no tokens, so it takes writes only over loopback; this request came in "
                "on a Unix socket: set DPFL_API_TOKENS (and send 'Authorization: Bearer <token>') or use "
                "127.0.0.1"
            )
            assert http.get("/api/budgets").status_code == 200  # reads stay open
    finally:
        server.should_exit = True
        thread.join(timeout=20)

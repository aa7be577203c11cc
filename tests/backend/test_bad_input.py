"""Bad input gets a clear 4xx naming what is wrong, never a 500 (issue 17, items 8 and 10)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.backend.conftest import run_here

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
}
NUL = "contains a NUL character (\\x00), which no id, name or filter may hold; remove it."


def field_error(res, loc: list, *, error: str = "SpecError", status: int = 422) -> str:
    """Asserts a one-field error at `loc`; returns its message."""
    assert res.status_code == status, res.text
    body = res.json()
    assert body["error"] == error and [d["loc"] for d in body["detail"]] == [loc], body
    return body["detail"][0]["msg"]


@pytest.fixture
def quiet(client) -> TestClient:
    """The client, answering a server error with its 500 instead of raising it."""
    return TestClient(client.app, raise_server_exceptions=False)


@pytest.mark.parametrize("path", ["/api/runs", "/api/sweeps"])
def test_an_offset_beyond_the_databases_integers_is_a_422(quiet, path):
    res = quiet.get(path, params={"offset": 2**63})
    msg = field_error(res, ["query", "offset"], error="RequestValidationError")
    assert msg == "Input should be less than or equal to 1000000000"
    assert quiet.get(path, params={"offset": 10**9}).json()["items"] == []


@pytest.mark.parametrize(
    ("method", "url", "loc"),
    [
        ("GET", "/api/runs/a%00b", ["path", "run_id"]),
        ("DELETE", "/api/runs/a%00b", ["path", "run_id"]),
        ("GET", "/api/runs/a%00b/ledger", ["path", "run_id"]),
        ("GET", "/api/runs?status=a%00b", ["query", "status"]),
        ("GET", "/api/runs.csv?dataset=%00", ["query", "dataset"]),
        ("GET", "/api/budgets/a%00b", ["path", "dataset"]),
        ("GET", "/api/sweeps/a%00b/summary", ["path", "sweep_id"]),
        ("GET", "/api/figures/spent?runs=a%00b", ["query", "runs"]),
        ("GET", "/api/events?run=a%00b&timeout=0.01", ["query", "run"]),
    ],
)
def test_a_nul_byte_in_an_id_or_filter_is_a_422_naming_it(quiet, method, url, loc):
    assert field_error(quiet.request(method, url), loc) == NUL


def test_a_nul_byte_in_a_body_string_is_a_422_naming_it(quiet):
    res = quiet.post("/api/sweeps", json={"name": "a\x00", "base": SPEC, "grid": {"seed": [0]}})
    assert field_error(res, ["body", "name"]) == NUL
    res = quiet.put("/api/budgets/digits", json={"total_epsilon": 1.0, "x\x00": 1})
    assert field_error(res, ["body", "x\\x00"]) == NUL


@pytest.mark.parametrize(("algorithm", "accountant"), [("isrl_mbsgd", "rdp"), ("uldp_avg", "gdp")])
@pytest.mark.parametrize("path", ["/api/privacy/project", "/api/runs"])
def test_a_sigma_the_accountant_cannot_compute_with_is_a_422_naming_it(quiet, path, algorithm, accountant):
    privacy = {"noise_multiplier": 1e-300, "delta": 1e-5, "accountant": accountant}
    msg = field_error(
        quiet.post(path, json=SPEC | {"algorithm": algorithm, "privacy": privacy}),
        ["body", "privacy", "noise_multiplier"],
    )
    assert msg.startswith(f"is outside what the '{accountant}' accountant can compute; got 1e-300 (")
    assert msg.endswith("give a larger σ.")
    assert quiet.get("/api/runs").json()["total"] == 0  # nothing admitted


def test_an_accountant_that_overflows_on_a_ledger_is_a_422_naming_it(quiet, settings):
    spec = SPEC | {"privacy": {"noise_multiplier": 0.01, "delta": 1e-5}}
    run_id = quiet.post("/api/runs", json=spec).json()["id"]
    run_here(settings, run_id)
    for url in (f"/api/runs/{run_id}/ledger", f"/api/runs/{run_id}/figures"):
        msg = field_error(quiet.get(url, params={"accountant": "gdp"}), ["query", "accountant"])
        assert msg == "'gdp' cannot compute this run's ε (OverflowError: math range error)."
        msg = field_error(quiet.get(url, params={"accountant": "nope"}), ["query", "accountant"])
        assert msg == "unknown accountant 'nope'; registered: gdp, group, pate, pld, rdp"


def test_query_and_header_errors_are_located_there(quiet):
    assert field_error(quiet.get("/api/runs?sort=colour"), ["query", "sort"]).startswith("must be one of")
    assert field_error(quiet.get("/api/events?since=yesterday"), ["query", "since"]).startswith(
        "must be an ISO"
    )
    res = quiet.get("/api/events", headers={"Last-Event-ID": "yesterday"})
    assert field_error(res, ["header", "Last-Event-ID"]).startswith("must be an ISO")

"""Bad input gets a clear 4xx naming what is wrong, never a 500 (issue 17, items 8 and 10)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from dpfl.algorithms import registered_algorithms
from dpfl.privacy.accountants import registered_accountants
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
        # a parameter with no name: on every route, found by fuzzing
        ("GET", "/api/health?=%00", ["query", ""]),
        ("GET", "/api/runs?=%00", ["query", ""]),
        ("GET", "/api/runs/x?=%00", ["query", ""]),
        ("GET", "/api/runs?%00=1", ["query", "\\x00"]),
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
    users = {"users": {"kind": "uniform", "count": 20}} if algorithm == "uldp_avg" else {}  # it needs users
    spec = SPEC | {"algorithm": algorithm, "privacy": privacy, "dataset": SPEC["dataset"] | users}
    msg = field_error(
        quiet.post(path, json=spec),
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


def test_a_json_body_over_the_limit_is_a_413_before_it_is_parsed(quiet):
    big = b'{"a": "' + b"x" * 1_000_000 + b'"}'
    res = quiet.post("/api/runs", content=big, headers={"content-type": "application/json"})
    assert res.status_code == 413 and res.json() == {
        "detail": "the request body is over this server's limit of 1,000,000 bytes (DPFL_MAX_BODY_BYTES); "
        "got 1,000,009 bytes. Upload data files with POST /api/datasets.",
        "error": "PayloadTooLarge",
    }

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b"x" * 100_000

    res = quiet.post("/api/privacy/project", content=chunks(), headers={"content-type": "application/json"})
    assert res.status_code == 413 and "got more than 1,000,000 bytes" in res.json()["detail"]
    # an upload keeps its own limit
    csv = b"x1,y\n" + b"".join(f"{i},{i % 2}\n".encode() for i in range(150_000))
    assert len(csv) > 1_000_000
    res = quiet.post("/api/datasets", files={"file": ("t.csv", csv)}, data={"name": "big", "label": "y"})
    assert res.status_code == 201, res.text


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deeply_nested_json_is_a_422(quiet, depth):
    res = quiet.post(
        "/api/runs", content=b"[" * depth + b"]" * depth, headers={"content-type": "application/json"}
    )
    assert res.status_code == 422, res.text
    body = res.json()
    assert body["error"] == "RequestValidationError" and body["detail"][0]["loc"] == ["body"], body
    assert "64 levels" in body["detail"][0]["msg"]


def test_options_is_a_405_with_the_paths_methods(quiet):
    for path, allow in [
        ("/api/runs", "GET, HEAD, POST"),
        ("/api/runs/abc", "DELETE, GET, HEAD, PATCH"),
        ("/api/budgets/digits", "DELETE, GET, HEAD, PUT"),
        ("/", "GET, HEAD"),
    ]:
        res = quiet.options(path)
        assert res.status_code == 405 and res.headers["allow"] == allow, (path, res.headers, res.text)
        assert res.json() == {
            "detail": f"OPTIONS is not supported (this server sends no CORS headers); {path} allows {allow}",
            "error": "MethodNotAllowed",
        }
    assert quiet.options("/api/nope").json() == {
        "detail": "/api/nope is not a path of this API",
        "error": "NotFound",
    }


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/api/privacy/project", "POST"),  # the browser app's files answered 404
        ("PUT", "/api/budgets", "GET, HEAD"),  # and 422
        ("POST", "/api/runs/abc", "DELETE, GET, HEAD, PATCH"),
    ],
)
def test_a_method_an_api_path_does_not_take_is_a_405_with_allow(quiet, method, path, allow):
    res = quiet.request(method, path, json={})
    assert res.status_code == 405 and res.headers["allow"] == allow, res.text
    assert res.json() == {
        "detail": f"{method} is not a method of {path}; {path} allows {allow}",
        "error": "MethodNotAllowed",
    }
    assert quiet.get("/api/nope").status_code == 404


def test_a_body_that_is_not_utf8_is_a_422_like_malformed_json(quiet):
    res = quiet.post(
        "/api/runs", content=b'{"algorithm": "\xff"}', headers={"content-type": "application/json"}
    )
    msg = field_error(res, ["body"], error="RequestValidationError")
    assert msg == "must be UTF-8 JSON; byte 0xff at position 15 is not UTF-8"
    malformed = quiet.post(
        "/api/runs", content=b'{"algorithm": ', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 422 and malformed.json()["error"] == "RequestValidationError"


def test_archived_takes_true_or_false_only(quiet):
    run_id = quiet.post("/api/runs", json=SPEC).json()["id"]
    for value in (0, 1, "true", "yes"):
        msg = field_error(
            quiet.patch(f"/api/runs/{run_id}", json={"archived": value}),
            ["body", "archived"],
            error="RequestValidationError",
        )
        assert msg == "Input should be a valid boolean", (value, msg)
    assert quiet.patch(f"/api/runs/{run_id}", json={"archived": True}).json()["archived"] is True


def test_the_schema_says_what_the_checks_take(quiet):
    """A run spec body is the RunSpec, not any object; `sort` is an enum of the keys the list sorts by."""
    schema = quiet.get("/openapi.json").json()
    body = schema["paths"]["/api/privacy/project"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"] == "#/components/schemas/RunSpec", body
    # a run is a RunSpec, or an ExternalRun executed elsewhere (issue 45)
    body = schema["paths"]["/api/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["anyOf"] == [
        {"$ref": "#/components/schemas/RunSpec"},
        {"$ref": "#/components/schemas/ExternalRun"},
    ], body
    assert schema["components"]["schemas"]["ExternalRun"]["properties"]["source"]["const"] == "external"
    spec = schema["components"]["schemas"]["RunSpec"]
    assert spec["required"] == ["algorithm"] and spec["additionalProperties"] is False
    assert spec["properties"]["privacy"]["anyOf"][0] == {"$ref": "#/components/schemas/PrivacySpec"}
    assert "PrivacySpec" in schema["components"]["schemas"]
    (sort,) = [p for p in schema["paths"]["/api/runs"]["get"]["parameters"] if p["name"] == "sort"]
    assert "-created_at" in sort["schema"]["enum"] and "final_accuracy" in sort["schema"]["enum"]
    assert quiet.get("/api/runs", params={"sort": "colour"}).status_code == 422


def test_the_schema_is_as_strict_as_the_checks(quiet):
    """What schemathesis's checks found the schema did not say (schemathesis.toml): every string
    refuses NUL, names are enums, and each rule the server applies to one field is in its schema."""
    schema = quiet.get("/openapi.json").json()
    spec = schema["components"]["schemas"]["RunSpec"]
    assert spec["properties"]["algorithm"]["enum"] == registered_algorithms()
    assert schema["components"]["schemas"]["DatasetSpec"]["properties"]["name"]["pattern"] == "^[^\\u0000]*$"

    def parameter(path, name, method="get"):
        (found,) = [p for p in schema["paths"][path][method]["parameters"] if p["name"] == name]
        return found["schema"]

    assert parameter("/api/runs/{run_id}/ledger", "accountant")["enum"] == ["", *registered_accountants()]
    assert parameter("/api/runs/{run_id}/figures", "accountant")["enum"] == ["", *registered_accountants()]
    assert parameter("/api/runs", "q")["anyOf"][0]["pattern"] == "^[^\\u0000]*$"
    assert parameter("/api/budgets/{dataset}", "dataset", "put")["not"] == {"const": "csv"}
    assert parameter("/api/events", "since")["anyOf"] == [{"format": "date-time"}, {"const": ""}]
    tags = schema["components"]["schemas"]["RunPatch"]["properties"]["tags"]["items"]["pattern"]
    for tag, ok in [
        ("mnist", True),
        (" a b ", True),
        ("", False),
        ("  ", False),
        ("a,b", False),
        ("x" * 41, False),
    ]:
        assert (re.match(tags, tag) is not None) is ok, tag
    audit = schema["components"]["schemas"]["AuditCreate"]["properties"]["black_box_trials"]
    assert audit["anyOf"] == [{"const": 0}, {"minimum": 100}]
    upload = schema["paths"]["/api/datasets"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert upload["schema"]["properties"]["label"]["minLength"] == 1
    assert schema["components"]["schemas"]["BudgetUpdate"]["additionalProperties"] is False


def test_a_query_parameter_given_twice_is_a_422_unless_it_takes_several(quiet):
    res = quiet.get("/api/runs", params=[("status", "queued"), ("status", "running")])
    assert field_error(res, ["query", "status"]) == "is given more than once; it takes one value."
    assert quiet.get("/api/runs", params=[("tag", "a"), ("tag", "b")]).status_code == 200
    field_error(quiet.get("/api/runs.csv", params=[("limit", 1), ("limit", 2)]), ["query", "limit"])


def test_a_bad_since_is_refused_even_beside_a_good_last_event_id(quiet):
    res = quiet.get(
        "/api/events",
        params={"since": "true", "timeout": 0.01},
        headers={"Last-Event-ID": "2000-01-01T00:00:00Z"},
    )
    field_error(res, ["query", "since"])
    res = quiet.get("/api/events", params={"since": "2000-01-01t00:00:00z", "timeout": 0.01})
    assert res.status_code == 200  # RFC 3339's lower-case t and z


def test_an_unknown_accountant_is_refused_for_a_non_private_run_too(quiet, client):
    run_id = quiet.post(
        "/api/runs", json={"algorithm": "fedavg", "dataset": {"name": "digits"}, "rounds": 1}
    ).json()["id"]
    msg = field_error(
        quiet.get(f"/api/runs/{run_id}/figures", params={"accountant": "AAA"}), ["query", "accountant"]
    )
    assert msg.startswith("unknown accountant 'AAA'; registered: ")
    assert quiet.get(f"/api/runs/{run_id}/figures", params={"accountant": ""}).status_code == 200


def test_a_budget_with_an_unknown_field_is_refused(quiet):
    res = quiet.put("/api/budgets/digits", json={"total_epsilon": 1.0, "public_tset": True})
    assert (
        field_error(res, ["body", "public_tset"], error="RequestValidationError")
        == "Extra inputs are not permitted"
    )


def test_a_budget_needs_a_dataset_and_can_be_deleted(quiet, settings):
    res = quiet.put("/api/budgets/nope", json={"total_epsilon": 1.0})
    assert res.status_code == 404 and res.json()["error"] == "NotFound"
    detail = res.json()["detail"]
    assert (
        detail.startswith(
            "dataset 'nope' is neither a registered dataset nor an upload, so it cannot have a "
            "budget; allowed: adult, "
        )
        and "digits" in detail
    )
    assert quiet.get("/api/budgets").json() == []
    csv = b"x1,y\n" + b"".join(f"{i},{i % 2}\n".encode() for i in range(100))
    assert (
        quiet.post(
            "/api/datasets", files={"file": ("t.csv", csv)}, data={"name": "mine", "label": "y"}
        ).status_code
        == 201
    )
    assert quiet.put("/api/budgets/mine", json={"total_epsilon": 1.0}).status_code == 200
    assert "mine" in quiet.put("/api/budgets/nope", json={"total_epsilon": 1.0}).json()["detail"]

    assert quiet.put("/api/budgets/digits", json={"total_epsilon": 10.0}).status_code == 200
    run_id = quiet.post("/api/runs", json=SPEC | {"privacy": {"epsilon": 1.0, "delta": 1e-5}}).json()["id"]
    res = quiet.delete("/api/budgets/digits")
    assert res.status_code == 409 and res.json() == {
        "detail": f"dataset 'digits' has queued or running runs ({run_id}); "
        "cancel them or let them finish, then delete its budget",
        "error": "Conflict",
    }
    assert quiet.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert quiet.delete("/api/budgets/digits").status_code == 204
    assert quiet.get("/api/budgets/digits").status_code == 404
    assert quiet.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"
    assert quiet.delete("/api/budgets/digits").json() == {
        "detail": "dataset 'digits' has no privacy budget; datasets with one: mine",
        "error": "NotFound",
    }


def test_deleting_a_budget_needs_a_token_when_tokens_are_set(settings):
    strict = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(strict)) as c:
        assert c.delete("/api/budgets/digits").status_code == 401
        assert c.delete("/api/budgets/digits", headers={"Authorization": "Bearer s3cret"}).status_code == 404

"""PATCH /api/runs/{id}: names, tags, notes and archiving, validated field by field, and seen at
once by the cached runs list."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.db import Database
from backend.main import create_app
from backend.models import Run

pytestmark = pytest.mark.service


@pytest.fixture
def run_id(settings) -> str:
    database = Database(settings.database_url)
    with database.session() as session:
        session.add(Run(id="r1", algorithm="fedavg", dataset="digits", rounds=2, spec={"seed": 0}))
    database.engine.dispose()
    return "r1"


def test_patch_sets_only_the_fields_sent(client, run_id):
    res = client.patch(
        f"/api/runs/{run_id}", json={"name": "baseline", "tags": [" paper ", "mnist", "paper"]}
    )
    assert res.status_code == 200
    body = res.json()
    assert (body["name"], body["tags"], body["notes"], body["archived"]) == (
        "baseline",
        ["paper", "mnist"],
        "",
        False,
    )
    body = client.patch(f"/api/runs/{run_id}", json={"notes": "σ too small\nrerun"}).json()
    assert (body["name"], body["tags"], body["notes"]) == (
        "baseline",
        ["paper", "mnist"],
        "σ too small\nrerun",
    )
    got = client.get(f"/api/runs/{run_id}").json()
    assert (got["name"], got["tags"], got["notes"]) == ("baseline", ["paper", "mnist"], "σ too small\nrerun")
    assert client.patch(f"/api/runs/{run_id}", json={"tags": [], "name": ""}).json()["tags"] == []


def test_the_cached_list_shows_a_patch_at_once(client, run_id):
    assert client.get("/api/runs").json()["items"][0]["name"] == ""  # now cached
    client.patch(f"/api/runs/{run_id}", json={"name": "renamed"})
    assert client.get("/api/runs").json()["items"][0]["name"] == "renamed"
    client.patch(f"/api/runs/{run_id}", json={"archived": True})
    assert client.get("/api/runs").json()["total"] == 0
    assert client.get("/api/runs", params={"archived": "true"}).json()["items"][0]["archived"] is True


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        ({"name": "x" * 201}, ["body", "name"], "String should have at most 200 characters"),
        ({"name": None}, ["body", "name"], "Input should be a valid string"),
        ({"notes": "x" * 10_001}, ["body", "notes"], "String should have at most 10000 characters"),
        (
            {"archived": "perhaps"},
            ["body", "archived"],
            "Input should be a valid boolean",
        ),
        ({"tags": "a"}, ["body", "tags"], "Input should be a valid list"),
        (
            {"tags": [str(i) for i in range(21)]},
            ["body", "tags"],
            "List should have at most 20 items after validation, not 21",
        ),
        (
            {"tags": ["ok", " "]},
            ["body", "tags"],
            "tag 1 must be 1 to 40 characters after trimming, without commas; got ' '",
        ),
        (
            {"tags": ["a,b"]},
            ["body", "tags"],
            "tag 0 must be 1 to 40 characters after trimming, without commas; got 'a,b'",
        ),
        (
            {"tags": ["x" * 41]},
            ["body", "tags"],
            f"tag 0 must be 1 to 40 characters after trimming, without commas; got '{'x' * 41}'",
        ),
        (
            {"tags": ["{x}"] * 2 + ["{y},"]},
            ["body", "tags"],
            "tag 2 must be 1 to 40 characters after trimming, without commas; got '{y},'",
        ),
        ({"colour": "red"}, ["body", "colour"], "Extra inputs are not permitted"),
    ],
)
def test_bad_field_is_a_422_naming_it_and_changes_nothing(client, run_id, body, loc, msg):
    res = client.patch(f"/api/runs/{run_id}", json=body | {"notes": "kept?"} if "notes" not in body else body)
    assert res.status_code == 422
    assert [(e["loc"], e["msg"]) for e in res.json()["detail"]] == [(loc, msg)]
    assert client.get(f"/api/runs/{run_id}").json()["notes"] == ""


def test_unknown_run_is_404(client):
    res = client.patch("/api/runs/nope", json={"name": "x"})
    assert res.status_code == 404
    assert res.json() == {"detail": "run 'nope' does not exist", "error": "NotFound"}


def test_patch_needs_a_token_when_tokens_are_set(settings, run_id):
    guarded = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(guarded)) as c:
        assert c.patch(f"/api/runs/{run_id}", json={"name": "x"}).status_code == 401
        ok = c.patch(f"/api/runs/{run_id}", json={"name": "x"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["name"] == "x"

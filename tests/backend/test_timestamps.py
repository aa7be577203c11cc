"""Every timestamp the API returns is UTC with its offset, on SQLite and on Postgres (issue 17, item 11).

SQLite keeps no time zone: its datetimes came back naive and were sent without an offset, which
a browser reads as local time. Postgres sends them in the session's time zone.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from tests.backend.conftest import run_here

pytestmark = pytest.mark.service

ISO = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")
SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "privacy": {"epsilon": 3.0, "delta": 1e-5},
}


def timestamps(value, where: str = "") -> list[tuple[str, str]]:
    """Returns (where, value) of every string in a JSON value that reads as a timestamp."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in timestamps(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [t for i, v in enumerate(value) for t in timestamps(v, f"{where}[{i}]")]
    return [(where, value)] if isinstance(value, str) and ISO.match(value) else []


@pytest.fixture
def app_client(settings):
    """The app; on Postgres with a session time zone far from UTC (+05:30)."""
    if settings.database_url.startswith("postgresql"):
        settings = settings.model_copy(
            update={"database_url": settings.database_url + "?options=-c%20timezone%3DAsia/Kolkata"}
        )
    with TestClient(create_app(settings)) as c:
        yield c, settings


def test_every_timestamp_is_utc_with_an_offset(app_client):
    client, settings = app_client
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    run_here(settings, run_id)
    client.put("/api/budgets/breast_cancer", json={"total_epsilon": 50.0})  # a charge, settled
    protected = SPEC | {"dataset": {"name": "breast_cancer", "silos": 2, "options": {"standardise": "none"}}}
    run_here(settings, client.post("/api/runs", json=protected).json()["id"])
    sweep = {"base": SPEC, "grid": {"privacy.epsilon": [2.0]}}
    sweep_id = client.post("/api/sweeps", json=sweep).json()["id"]
    assert client.post(f"/api/runs/{run_id}/audit", json={"trials": 10_000}).status_code == 202
    found = []
    for path in (
        "/api/runs",
        f"/api/runs/{run_id}",
        "/api/sweeps",
        f"/api/sweeps/{sweep_id}",
        "/api/budgets",
        "/api/budgets/breast_cancer",
        f"/api/runs/{run_id}/audit",
    ):
        res = client.get(path)
        assert res.status_code == 200, (path, res.text)
        found += [(path + where, value) for where, value in timestamps(res.json())]
    rows = list(csv.DictReader(io.StringIO(client.get("/api/runs.csv").text)))
    found += [("runs.csv", row["created_at"]) for row in rows]
    keys = {where.rsplit(".", 1)[-1] for where, _ in found}
    assert {"created_at", "started_at", "finished_at", "csv"} <= keys, keys
    assert len(found) >= 15
    wrong = [(where, value) for where, value in found if not value.endswith(("+00:00", "Z"))]
    assert wrong == []

"""Specs and uploads that could never run are refused at submission (issue 17, item 9)."""

from __future__ import annotations

import pytest

from dpfl.data import registered_datasets

pytestmark = pytest.mark.service

SPEC = {
    "algorithm": "fedavg",
    "dataset": {"name": "digits", "silos": 2},
    "model": {"name": "logreg"},
    "rounds": 2,
}


def field_error(loc: list[str], msg: str, error: str = "SpecError") -> dict:
    return {"detail": [{"loc": ["body", *loc], "msg": msg, "type": "value_error"}], "error": error}


@pytest.mark.parametrize(
    ("change", "loc", "msg"),
    [
        ({"rounds": "2"}, ["rounds"], "input should be a valid integer; got '2'."),
        ({"rounds": True}, ["rounds"], "input should be a valid integer; got True."),
        ({"seed": "1"}, ["seed"], "input should be a valid integer; got '1'."),
        (
            {"dataset": {"name": "digits", "silos": "2"}},
            ["dataset", "silos"],
            "input should be a valid integer; got '2'.",
        ),
    ],
)
def test_strings_and_bools_for_numbers_are_422(client, change, loc, msg):
    for path in ("/api/runs", "/api/privacy/project"):
        res = client.post(path, json=SPEC | change)
        assert (res.status_code, res.json()) == (422, field_error(loc, msg)), path
    res = client.post("/api/sweeps", json={"base": SPEC, "grid": {"rounds": ["2"]}})
    assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["body", "grid", "rounds"]
    assert res.json()["detail"][0]["msg"].startswith("input should be a valid integer; got '2'.")
    assert client.get("/api/runs").json()["items"] == []


def test_an_unknown_dataset_is_422_listing_the_registered_ones(client):
    listed = ", ".join(registered_datasets())
    for spec in (
        SPEC | {"dataset": {"name": "nope", "silos": 2}},  # not private: nothing loads the data
        {**SPEC, "algorithm": "isrl_mbsgd", "dataset": {"name": "nope"}, "privacy": {"epsilon": 1.0}},
    ):
        res = client.post("/api/runs", json=spec)
        assert (res.status_code, res.json()) == (
            422,
            field_error(
                ["dataset", "name"], f"unknown dataset 'nope'; registered: {listed}", "UnknownNameError"
            ),
        )
    assert client.get("/api/runs").json()["items"] == []


def upload(client, text: str, name: str):
    return client.post(
        "/api/datasets",
        files={"file": ("t.csv", text.encode(), "text/csv")},
        data={"name": name, "label": "y"},
    )


def rows(cell: str) -> str:
    return "a,b,y\n" + "".join(f"{i},{cell if i == 3 else i % 5},{i % 2}\n" for i in range(40))


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "NaN", "1e999", "Infinity"])
def test_an_upload_with_a_non_finite_number_is_422_naming_the_column(client, cell):
    res = upload(client, rows(cell), "bad")
    assert (res.status_code, res.json()) == (
        422,
        field_error(
            ["file"],
            "column 'b' holds a number that is not finite (NaN or infinite) in data row 4; "
            "give finite numbers, and leave a missing value's cell empty.",
        ),
    )
    assert client.get("/api/datasets").json()["uploads"] == []


def test_an_upload_with_empty_cells_is_accepted_and_runs(client, settings):
    from tests.backend.conftest import run_here

    res = upload(client, rows(""), "holes")
    assert res.status_code == 201, res.text
    spec = SPEC | {"dataset": {**res.json()["spec_dataset"], "silos": 2}}
    run_id = client.post("/api/runs", json=spec).json()["id"]
    run_here(settings, run_id)
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["status"] == "succeeded", body["error"]

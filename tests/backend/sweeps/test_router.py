"""The sweeps API and the runs CSV against a real database (Postgres and SQLite), no worker."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from dpfl import runner
from dpfl.algorithms import registered_algorithms
from dpfl.spec import parse_spec
from tests.backend.runs.test_listing import CSV_COLUMNS

pytestmark = pytest.mark.service

BASE = {
    "params": {"lr": 0.5, "batch_size": 64},
    "params_by_algorithm": {"isrl_mbsgd": {"clip": 1.0}},
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 3,
    "privacy": {"delta": 1e-5},
}
GRID = {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [0.5, 1, 2], "seed": [0, 1]}
NO_RUNS = {"queued": 0, "preparing": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0}


def submit(client, base=BASE, grid=GRID, headers=None, **extra):
    return client.post("/api/sweeps", json={"base": base, "grid": grid, **extra}, headers=headers)


def assert_nothing_created(client):
    assert client.get("/api/sweeps").json()["total"] == 0
    assert client.get("/api/runs").json()["total"] == 0


def test_sweep_with_fedavg_runs_it_once_per_seed(client):
    res = submit(client, name="ε on digits")
    assert res.status_code == 201
    body = res.json()
    assert (body["name"], body["num_runs"], body["grid"], body["base"]) == ("ε on digits", 8, GRID, BASE)
    assert body["counts"] == NO_RUNS | {"queued": 8} and body["progress"] == 0.0
    assert len(set(body["run_ids"])) == 8
    runs = [client.get(f"/api/runs/{run_id}").json() for run_id in body["run_ids"]]
    assert [(r["algorithm"], r["target_epsilon"], r["sweep_id"]) for r in runs] == [
        ("isrl_mbsgd", eps, body["id"]) for eps in (0.5, 0.5, 1.0, 1.0, 2.0, 2.0)
    ] + [("fedavg", None, body["id"])] * 2
    specs = [client.get(f"/api/runs/{run_id}/spec").json() for run_id in body["run_ids"]]
    assert [s["seed"] for s in specs] == [0, 1] * 4
    assert specs[0]["params"] == {"lr": 0.5, "batch_size": 64, "clip": 1.0}
    assert specs[-1]["privacy"] is None and specs[-1]["params"]["lr"] == 0.5
    listed = client.get("/api/runs", params={"sweep": body["id"]}).json()
    assert listed["total"] == 8


def test_sweep_detail_has_its_runs_counts_and_progress(client):
    body = submit(client).json()
    res = client.get(f"/api/sweeps/{body['id']}")
    assert res.status_code == 200
    detail = res.json()
    assert {k: detail[k] for k in ("id", "name", "num_runs", "grid", "counts", "progress")} == {
        "id": body["id"],
        "name": "",
        "num_runs": 8,
        "grid": GRID,
        "counts": NO_RUNS | {"queued": 8},
        "progress": 0.0,
    }
    assert sorted(r["id"] for r in detail["runs"]) == sorted(body["run_ids"])
    assert {r["status"] for r in detail["runs"]} == {"queued"}
    client.post(f"/api/runs/{body['run_ids'][0]}/cancel")
    assert client.get(f"/api/sweeps/{body['id']}").json()["counts"] == NO_RUNS | {"queued": 7, "cancelled": 1}


def test_sweeps_are_listed_newest_first_with_status_counts(client):
    first = submit(client, grid={"algorithm": ["fedavg"], "seed": [0, 1]}, name="first").json()
    second = submit(client, name="second").json()
    client.post(f"/api/runs/{second['run_ids'][0]}/cancel")
    page = client.get("/api/sweeps").json()
    assert (page["total"], page["next_offset"]) == (2, None)
    assert [(s["id"], s["name"], s["num_runs"]) for s in page["items"]] == [
        (second["id"], "second", 8),
        (first["id"], "first", 2),
    ]
    assert page["items"][0]["counts"] == NO_RUNS | {"queued": 7, "cancelled": 1}
    assert page["items"][1]["counts"] == NO_RUNS | {"queued": 2}
    one = client.get("/api/sweeps", params={"limit": 1}).json()
    assert [s["id"] for s in one["items"]] == [second["id"]] and one["next_offset"] == 1


@pytest.mark.parametrize(
    ("base", "grid", "loc", "msg"),
    [
        (
            BASE,
            GRID | {"privacy.epsilon": [1, -1]},
            ["body", "grid", "privacy.epsilon"],
            'input should be greater than 0; got -1. (point 3 of 6: algorithm="isrl_mbsgd", '
            "privacy.epsilon=-1, seed=0)",
        ),
        (
            BASE | {"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 1.0}},
            {"colour": ["red"]},
            ["body", "grid", "colour"],
            'is not a known field. (point 1 of 1: colour="red")',
        ),
        (
            BASE,
            {"algorithm": ["isrl_mbsgd", "nope"]},
            ["body", "grid", "algorithm"],
            "unknown algorithm 'nope'; registered: " + ", ".join(registered_algorithms()),
        ),
        (
            BASE | {"rounds": 0},
            GRID,
            ["body", "base", "rounds"],
            'input should be greater than or equal to 1; got 0. (point 1 of 8: algorithm="isrl_mbsgd", '
            "privacy.epsilon=0.5, seed=0)",
        ),
        (
            BASE | {"params": {"lr": 0.5, "clip": 1.0}, "params_by_algorithm": {}},
            GRID,
            ["body", "base", "params", "clip"],
            'is not a known field. (point 7 of 8: algorithm="fedavg", seed=0)',
        ),
        (
            BASE | {"params_by_algorithm": {"isrl_mbsgd": {"clip": -1}}},
            GRID,
            ["body", "base", "params_by_algorithm", "isrl_mbsgd", "clip"],
            'input should be greater than 0; got -1. (point 1 of 8: algorithm="isrl_mbsgd", '
            "privacy.epsilon=0.5, seed=0)",
        ),
        (
            BASE | {"algorithm": "isrl_mbsgd", "privacy": None},
            {"seed": [0]},
            ["body", "base", "privacy"],
            "is required for isrl_mbsgd: give `epsilon` or `noise_multiplier`. (point 1 of 1: seed=0)",
        ),
        (
            BASE | {"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 1.0, "delta": 1e-5}},
            {"privacy.accountant": ["rdp", "gdp"]},
            ["body", "grid", "privacy.accountant"],
            "must account every planned release exactly; 'gdp' would not: Poisson-sampled Gaussian "
            "accounted by the GDP central limit theorem (approximate; can underestimate ε). An approximate "
            "ε can neither calibrate σ nor be the headline ε; use rdp or pld; got 'gdp'. (point 2 of 2: "
            'privacy.accountant="gdp")',
        ),
        (
            BASE,
            GRID | {"rounds": [3, 5000]},
            ["body", "grid", "rounds"],
            'must be ≤ 2000 on this server; got 5000. (point 2 of 16: algorithm="isrl_mbsgd", '
            "privacy.epsilon=0.5, seed=0, rounds=5000)",
        ),
    ],
)
def test_bad_field_is_422_naming_it_and_creates_nothing(client, base, grid, loc, msg):
    res = submit(client, base, grid)
    assert res.status_code == 422
    assert res.json() == {"detail": [{"loc": loc, "msg": msg, "type": "value_error"}], "error": "SpecError"}
    assert_nothing_created(client)


def test_too_many_points_is_422_saying_how_many(client):
    res = submit(
        client, BASE | {"algorithm": "isrl_mbsgd"}, {"privacy.epsilon": [1, 2, 3], "seed": list(range(167))}
    )
    assert res.status_code == 422
    assert res.json() == {
        "detail": [
            {
                "loc": ["body", "grid"],
                "msg": "has 501 points; a sweep may have at most 500 on this server. "
                "Give fewer values or split the sweep.",
                "type": "value_error",
            }
        ],
        "error": "SpecError",
    }
    assert_nothing_created(client)


def test_a_malformed_body_is_422(client):
    res = client.post("/api/sweeps", json={"base": BASE, "grid": GRID, "colour": "red"})
    assert res.status_code == 422
    assert res.json()["detail"][0]["loc"] == ["body", "colour"]
    assert client.post("/api/sweeps", json={"grid": GRID}).json()["detail"][0]["loc"] == ["body", "base"]


def test_overspending_sweep_is_409_and_creates_no_run(client):
    assert client.put("/api/budgets/digits", json={"total_epsilon": 5.0}).status_code == 200
    res = submit(
        client, grid={"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [1, 2], "seed": [0, 1]}
    )
    assert res.status_code == 409
    assert res.json() == {
        "detail": "dataset 'digits' has ε 5 left of 5; this sweep's 4 private runs need 6 in all",
        "error": "BudgetExceeded",
    }
    assert_nothing_created(client)
    budget = client.get("/api/budgets/digits").json()
    assert (budget["reserved"], budget["remaining"], budget["charges"]) == (0.0, 5.0, [])


def test_a_run_refused_on_admission_rolls_back_the_whole_sweep(client, settings, tmp_path):
    # noise-multiplier targets are projected run by run, so the second run is refused by admission
    client.put("/api/budgets/digits", json={"total_epsilon": 5.0})
    base = BASE | {"algorithm": "isrl_mbsgd", "privacy": {"noise_multiplier": 1.0, "delta": 1e-5}}
    spec = {k: v for k, v in base.items() if k != "params_by_algorithm"} | {
        "params": BASE["params"] | {"clip": 1.0}
    }
    needs = [
        runner.project(
            runner.prepare(
                parse_spec(spec | {"seed": seed}), data_dirs=settings.data_dirs, cache_dir=tmp_path
            )
        ).planned_epsilon[-1]
        for seed in (0, 1)
    ]
    assert 2.5 < needs[0] < 5 and 2.5 < needs[1] < 5  # one run fits, two do not
    res = submit(client, base, {"seed": [0, 1]})
    assert res.status_code == 409
    assert res.json() == {
        "detail": f"dataset 'digits' has ε {5 - needs[0]:.4g} left of 5; this run needs {needs[1]:.4g} "
        "(point 2 of 2); no run of the sweep was created",
        "error": "BudgetExceeded",
    }
    assert_nothing_created(client)
    assert client.get("/api/budgets/digits").json()["remaining"] == 5.0


def test_unknown_sweep_is_404(client):
    for path in ("/api/sweeps/nope", "/api/sweeps/nope/summary", "/api/sweeps/nope/summary.csv"):
        res = client.get(path)
        assert res.status_code == 404, path
        assert res.json() == {"detail": "sweep 'nope' does not exist", "error": "NotFound"}


def test_summary_of_a_queued_sweep_is_empty_with_its_counts(client):
    sweep_id = submit(client).json()["id"]
    res = client.get(f"/api/sweeps/{sweep_id}/summary")
    assert res.status_code == 200
    assert res.json() == {
        "sweep_id": sweep_id,
        "counts": NO_RUNS | {"queued": 8},
        "rows": [],
        "pareto": [],
        "reference": [],
    }
    text = client.get(f"/api/sweeps/{sweep_id}/summary.csv").text
    assert list(csv.reader(io.StringIO(text))) == [
        [
            "algorithm",
            "setting",
            "notion",
            "target_epsilon",
            "noise_multiplier",
            "n",
            "metric",
            "accuracy_mean",
            "accuracy_std",
            "epsilon_mean",
            "epsilon_max",
        ]
    ]


def test_runs_csv_is_its_own_path_with_the_runs_filters(client):
    sweep = submit(client).json()
    other = client.post(
        "/api/runs", json={"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 4}, "rounds": 3}
    )
    assert other.status_code == 201
    res = client.get("/api/runs.csv")
    assert res.status_code == 200
    assert res.headers["content-type"] == "text/csv; charset=utf-8"
    assert res.headers["x-total-count"] == "9"
    table = list(csv.DictReader(io.StringIO(res.text)))
    header = list(table[0])
    assert header[: len(CSV_COLUMNS)] == CSV_COLUMNS and len(table) == 9
    # then a column per param of the runs, defaults written out: the sweep's lr, fedavg's own
    assert "params.lr" in header and all(c.startswith("params.") for c in header[len(CSV_COLUMNS) :])
    assert {r["params.lr"] for r in table[1:]} == {"0.5"} and table[0]["params.lr"] != ""
    assert table[0]["id"] == other.json()["id"]  # newest first, as GET /api/runs
    assert (table[0]["sweep_id"], table[0]["target_epsilon"], table[0]["status"]) == ("", "", "queued")
    only = list(csv.DictReader(io.StringIO(client.get("/api/runs.csv", params={"sweep": sweep["id"]}).text)))
    assert sorted(r["id"] for r in only) == sorted(sweep["run_ids"])
    eps = client.get(
        "/api/runs.csv", params={"sweep": sweep["id"], "algorithm": "isrl_mbsgd", "sort": "target_epsilon"}
    )
    assert [r["target_epsilon"] for r in csv.DictReader(io.StringIO(eps.text))] == [
        "0.5",
        "0.5",
        "1.0",
        "1.0",
        "2.0",
        "2.0",
    ]
    assert all(r["created_at"].endswith("+00:00") for r in only)  # UTC, also from SQLite
    assert sorted(r["delta"] for r in only) == ["", ""] + ["1e-5"] * 6  # fedavg has none
    bad = client.get("/api/runs.csv", params={"sort": "colour"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "sort"]


def test_submitting_a_sweep_needs_a_token_when_tokens_are_set(settings):
    guarded = settings.model_copy(update={"api_tokens": "s3cret"})
    with TestClient(create_app(guarded)) as c:
        assert submit(c).status_code == 401
        assert submit(c, headers={"Authorization": "Bearer wrong"}).status_code == 401
        res = c.post(
            "/api/sweeps", json={"base": BASE, "grid": GRID}, headers={"Authorization": "Bearer s3cret"}
        )
        assert res.status_code == 201
        assert c.get("/api/sweeps").status_code == 200  # reads stay open


def test_a_preview_counts_runs_and_tasks_and_estimates_from_past_runs_here(client, settings):
    from tests.backend.conftest import run_here

    mixed = BASE | {"model_by_algorithm": {"gdp_gd": {"name": "logreg"}}}
    grid = {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [0.5, 1], "seed": [0, 1, 2]}
    first = client.post("/api/sweeps/preview", json={"base": mixed, "grid": grid})
    assert first.status_code == 200
    body = first.json()
    # isrl_mbsgd: 2 ε × 3 seeds, one batch of 6; fedavg once per seed, alone (it does not batch)
    assert (body["num_runs"], body["tasks"], body["estimated_seconds"]) == (9, 4, None)
    assert [
        (a["algorithm"], a["runs"], a["tasks"], a["models"], a["seconds_per_round"], a["past_runs"])
        for a in body["algorithms"]
    ] == [
        ("isrl_mbsgd", 6, 1, ["mlp"], None, 0),
        ("fedavg", 3, 3, ["mlp"], None, 0),
    ]
    assert_nothing_created(client)  # a preview writes nothing

    done = []
    for algorithm in ("isrl_mbsgd", "fedavg"):
        spec = {k: v for k, v in BASE.items() if k != "params_by_algorithm"} | {"algorithm": algorithm}
        if algorithm == "fedavg":
            spec.pop("privacy")
        else:
            spec["privacy"] = {"delta": 1e-5, "epsilon": 1.0}
            spec["params"] = BASE["params"] | {"clip": 1.0}
        run = client.post("/api/runs", json=spec).json()
        assert "id" in run, run
        run_here(settings, run["id"])
        done.append(client.get(f"/api/runs/{run['id']}").json())
    pace = {}
    for run in done:
        assert run["status"] == "succeeded", run
        started, finished = (dt.datetime.fromisoformat(run[k]) for k in ("started_at", "finished_at"))
        pace[run["algorithm"]] = (finished - started).total_seconds() / run["rounds"]
    body = client.post("/api/sweeps/preview", json={"base": mixed, "grid": grid}).json()
    got = {a["algorithm"]: (a["seconds_per_round"], a["past_runs"]) for a in body["algorithms"]}
    assert got["isrl_mbsgd"] == (pytest.approx(pace["isrl_mbsgd"]), 1)
    assert got["fedavg"] == (pytest.approx(pace["fedavg"]), 1)
    # one task of 6 isrl runs at 3 rounds, three fedavg tasks of 3 rounds each
    assert body["estimated_seconds"] == pytest.approx(3 * pace["isrl_mbsgd"] + 3 * 3 * pace["fedavg"])


def test_a_preview_refuses_what_submit_refuses_naming_the_field(client):
    base = {"dataset": {"name": "logistic", "silos": 4}, "model": {"name": "mlp"}, "rounds": 3}
    res = client.post(
        "/api/sweeps/preview", json={"base": base, "grid": {"algorithm": ["gdp_gd"], "privacy.mu": [1.0]}}
    )
    assert res.status_code == 422
    (error,) = res.json()["detail"]
    assert error["loc"] == ["body", "base", "model", "name"]
    assert error["msg"].startswith("must be `logreg` for gdp_gd")
    ok = client.post(
        "/api/sweeps/preview",
        json={
            "base": base | {"model_by_algorithm": {"gdp_gd": {"name": "logreg"}}},
            "grid": {"algorithm": ["gdp_gd"], "privacy.mu": [1.0]},
        },
    )
    assert ok.status_code == 200, ok.json()
    assert ok.json()["algorithms"][0]["models"] == ["logreg"]

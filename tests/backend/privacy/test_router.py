"""POST /api/privacy/project: σ and ε per round without running, checked against dpfl.runner."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from dpfl import runner
from dpfl.spec import parse_spec
from tests.factories import service_spec

pytestmark = pytest.mark.service

SPEC = service_spec(privacy={"epsilon": 3.0, "delta": 1e-5})


def local_plan(spec: dict) -> runner.Privacy:
    """Returns what dpfl.runner projects for the spec (the reference)."""
    return runner.project(runner.prepare(parse_spec(spec)))


def test_epsilon_target_is_calibrated_as_the_runner_does(client):
    res = client.post("/api/privacy/project", json=SPEC)
    assert res.status_code == 200
    body = res.json()
    reference = local_plan(SPEC)
    assert body["noise_multiplier"] == pytest.approx(reference.noise_multiplier, rel=1e-12)
    assert body["planned_epsilon"] == pytest.approx(reference.planned_epsilon, rel=1e-12)
    assert len(body["planned_epsilon"]) == 3
    assert body["planned_epsilon"] == sorted(body["planned_epsilon"])
    assert body["planned_epsilon"][-1] <= 3.0 and body["epsilon"] == body["planned_epsilon"][-1]
    assert body["epsilon"] == pytest.approx(3.0, rel=1e-2)  # calibration meets the target from below
    assert (body["notion"], body["target_epsilon"], body["delta"], body["accountant"], body["budget"]) == (
        "record",
        3.0,
        1e-5,
        "rdp",
        None,
    )


def test_noise_multiplier_spec_projects_its_epsilon(client):
    spec = SPEC | {"privacy": {"noise_multiplier": 1.5, "delta": 1e-5}}
    body = client.post("/api/privacy/project", json=spec).json()
    reference = local_plan(spec)
    assert (body["noise_multiplier"], body["target_epsilon"]) == (1.5, None)
    assert body["planned_epsilon"] == pytest.approx(reference.planned_epsilon, rel=1e-12)
    assert body["epsilon"] == pytest.approx(reference.planned_epsilon[-1], rel=1e-12)


def test_the_preview_names_what_the_ledger_would_not_cover(client):
    plain = client.post("/api/privacy/project", json=SPEC).json()
    assert plain["not_guaranteed"] is None
    pca = SPEC | {"dataset": {"name": "digits", "silos": 4, "features": {"pca": 10}}}
    fitted = client.post("/api/privacy/project", json=pca).json()
    assert fitted["not_guaranteed"] == (
        "PCA to 10 components fitted on the training rows, without noise: not covered by the ledger"
    )


def test_non_private_algorithm_projects_nothing(client):
    spec = {"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 4}, "rounds": 2}
    body = client.post("/api/privacy/project", json=spec).json()
    assert body.pop("partition_figure")["data"]
    assert body == {
        "label_histogram": body["label_histogram"],
        "notion": "none",
        "epsilon": None,
        "target_epsilon": None,
        "noise_multiplier": None,
        "delta": None,
        "accountant": None,
        "planned_epsilon": [],
        "budget": None,
        "not_guaranteed": None,
        "implausible": [],
        "warnings": [],
    }


def test_budget_is_the_datasets_remaining_epsilon(client):
    client.put("/api/budgets/digits", json={"total_epsilon": 10.0})
    assert client.post("/api/privacy/project", json=SPEC).json()["budget"] == 10.0
    assert client.post("/api/runs", json=SPEC).status_code == 201  # reserves its target, 3
    assert client.post("/api/privacy/project", json=SPEC).json()["budget"] == 7.0


@pytest.mark.parametrize(
    ("change", "loc", "msg"),
    [
        (
            {"privacy": {"epsilon": 3.0, "delta": 2}},
            ["body", "privacy", "delta"],
            "input should be less than 1; got 2.",
        ),
        (
            {"privacy": None},
            ["body", "privacy"],
            "is required for isrl_mbsgd: give `epsilon` or `noise_multiplier`.",
        ),
        ({"rounds": 5000}, ["body", "rounds"], "must be ≤ 2000 on this server; got 5000."),
        ({"params": {"clip": 0}}, ["body", "params", "clip"], "input should be greater than 0; got 0."),
    ],
)
def test_bad_spec_is_422_naming_the_field(client, change, loc, msg):
    res = client.post("/api/privacy/project", json=SPEC | change)
    assert res.status_code == 422
    assert res.json()["detail"] == [{"loc": loc, "msg": msg, "type": "value_error"}]


def test_missing_dataset_files_are_422(settings):
    spec = SPEC | {"dataset": {"name": "mnist", "silos": 4}}
    with TestClient(create_app(settings.model_copy(update={"data_dir": ""}))) as c:
        res = c.post("/api/privacy/project", json=spec)
    assert res.status_code == 422
    assert res.json()["error"] == "DatasetUnavailable"
    assert res.json()["detail"].startswith("4 dataset file(s) missing:")


def test_the_partition_histogram_is_shown_before_running(client):
    spec = {
        "algorithm": "fedavg",
        "dataset": {"name": "digits", "silos": 5, "partition": {"kind": "shards", "labels_per_silo": 2}},
        "rounds": 2,
    }
    body = client.post("/api/privacy/project", json=spec).json()
    histogram = body["label_histogram"]
    assert len(histogram) == 5 and sum(map(sum, histogram)) == 1438  # digits' training rows
    assert all(sum(1 for count in silo if count) <= 2 for silo in histogram)  # two labels per silo
    bars = body["partition_figure"]["data"]
    assert sum(sum(trace["y"]) for trace in bars) == 1438


@pytest.mark.parametrize(
    "dataset",
    [
        # users first: the Zipf law over silos deals the records (the preview once partitioned anyway)
        {"name": "digits", "silos": 4, "users": {"kind": "zipf", "count": 30, "silo_alpha": 2.0}},
        {"name": "digits", "silos": 4, "records_per_silo": 100, "labels": "parity"},
    ],
)
def test_the_partition_histogram_is_the_runs_own(client, dataset):
    spec = {"algorithm": "uldp_avg" if "users" in dataset else "fedavg", "dataset": dataset, "rounds": 2}
    if "users" in dataset:
        spec["privacy"] = {"epsilon": 3.0, "delta": 1e-5}
    body = client.post("/api/privacy/project", json=spec).json()
    run = runner.prepare(parse_spec(spec))
    assert body["label_histogram"] == run.data.label_histogram.tolist()
    assert [sum(silo) for silo in body["label_histogram"]] == run.data.silo_sizes.tolist()

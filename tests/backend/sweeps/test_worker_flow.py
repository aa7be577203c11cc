"""A small sweep end to end through a real worker: Postgres + Redis, and the embedded SQLite mode."""

from __future__ import annotations

import csv
import io
import statistics

import pytest

from backend.sweeps.export import SUMMARY_COLUMNS
from tests.backend.conftest import wait_for

pytestmark = pytest.mark.service

BASE = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.5, "batch_size": 64},
    "params_by_algorithm": {"isrl_mbsgd": {"clip": 1.0}},
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 3,
    "privacy": {"epsilon": 1.0, "delta": 1e-5},
}
GRID = {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [1, 4], "seed": [0, 1]}


def test_sweep_runs_to_completion_and_is_summarised(client, worker):
    created = client.post("/api/sweeps", json={"name": "tiny", "base": BASE, "grid": GRID}).json()
    assert created["num_runs"] == 6
    runs = [
        wait_for(client, run_id, {"succeeded", "failed", "cancelled"}, timeout=90)
        for run_id in created["run_ids"]
    ]
    assert [r["status"] for r in runs] == ["succeeded"] * 6, [r["error"] for r in runs]

    detail = client.get(f"/api/sweeps/{created['id']}").json()
    assert detail["counts"]["succeeded"] == 6 and detail["progress"] == 1.0

    summary = client.get(f"/api/sweeps/{created['id']}/summary").json()
    assert summary["counts"]["succeeded"] == 6
    rows = summary["rows"]
    assert [(r["algorithm"], r["target_epsilon"], r["n"]) for r in rows] == [
        ("fedavg", None, 2),
        ("isrl_mbsgd", 1.0, 2),
        ("isrl_mbsgd", 4.0, 2),
    ]
    for row in rows:
        members = [
            r
            for r in runs
            if (r["algorithm"], r["target_epsilon"]) == (row["algorithm"], row["target_epsilon"])
        ]
        accuracies = [r["final_accuracy"] for r in members]
        assert row["accuracy_mean"] == pytest.approx(statistics.fmean(accuracies), rel=1e-12)
        assert row["accuracy_std"] == pytest.approx(statistics.stdev(accuracies), rel=1e-9, abs=1e-15)
        if row["algorithm"] == "fedavg":
            assert (row["epsilon_mean"], row["epsilon_max"]) == (None, None)
        else:
            spent = [r["epsilon"] for r in members]
            assert (
                row["epsilon_max"] == max(spent) <= row["target_epsilon"] * (1 + 1e-6)
            )  # calibrated to the target
            assert row["epsilon_mean"] == pytest.approx(statistics.fmean(spent), rel=1e-12)

    fed, low, high = rows
    assert summary["reference"] == [{k: fed[k] for k in ("algorithm", "n", "accuracy_mean", "accuracy_std")}]
    first = {"algorithm": "isrl_mbsgd", "epsilon": 1.0, "accuracy": low["accuracy_mean"]}
    second = {"algorithm": "isrl_mbsgd", "epsilon": 4.0, "accuracy": high["accuracy_mean"]}
    # the lowest ε is always on the front; ε = 4 only if it buys accuracy
    expected = [first, second] if high["accuracy_mean"] > low["accuracy_mean"] else [first]
    assert summary["pareto"] == expected

    table = list(csv.reader(io.StringIO(client.get(f"/api/sweeps/{created['id']}/summary.csv").text)))
    assert table[0] == list(SUMMARY_COLUMNS) and len(table) == 1 + 3
    assert [line[0] for line in table[1:]] == ["fedavg", "isrl_mbsgd", "isrl_mbsgd"]
    assert float(table[2][SUMMARY_COLUMNS.index("accuracy_mean")]) == low["accuracy_mean"]

    exported = list(
        csv.DictReader(io.StringIO(client.get("/api/runs.csv", params={"sweep": created["id"]}).text))
    )
    assert len(exported) == 6 and {r["id"] for r in exported} == set(created["run_ids"])
    assert {r["status"] for r in exported} == {"succeeded"}
    assert all(float(r["duration_s"]) > 0 and 0 <= float(r["final_accuracy"]) <= 1 for r in exported)

"""Sweep summary statistics and their CSV, on hand-made numbers (no database)."""

from __future__ import annotations

import csv
import io
import statistics

import pytest

from backend.sweeps.export import SUMMARY_COLUMNS, summary_csv
from backend.sweeps.summary import Outcome, compare_cells, front, pareto_front, reference, summary_rows
from dpfl.configuration import configurations


def private(algorithm: str, eps: float, accuracy: float | None, spent: float | None = None) -> Outcome:
    return Outcome(algorithm, "record", eps, None, accuracy, eps if spent is None else spent)


RECORD = {"notion": "record", "metric": "accuracy", "dataset": None}  # a frontier point's unit here


def fedavg(accuracy: float) -> Outcome:
    return Outcome("fedavg", "none", None, None, accuracy, None)


def test_two_seeds_give_mean_and_sample_std():
    (row,) = summary_rows([private("isrl_mbsgd", 1.0, 0.8, 0.98), private("isrl_mbsgd", 1.0, 0.9, 1.0)])
    assert row == {
        "algorithm": "isrl_mbsgd",
        "setting": None,
        "notion": "record",
        "target_epsilon": 1.0,
        "noise_multiplier": None,
        "n": 2,
        "metric": "accuracy",
        "dataset": None,
        "accuracy_mean": pytest.approx(0.85, abs=1e-15),
        "accuracy_std": pytest.approx(0.07071067811865474, rel=1e-12),  # |0.9 - 0.8| / √2 (ddof = 1)
        "epsilon_mean": pytest.approx(0.99, abs=1e-15),
        "epsilon_max": 1.0,
    }


def test_three_seeds_std_matches_the_sample_formula():
    (row,) = summary_rows([private("a", 2.0, acc) for acc in (0.70, 0.75, 0.86)])
    # mean 0.77; squared deviations 0.0049, 0.0004, 0.0081 sum to 0.0134; / (3 - 1) = 0.0067
    assert row["accuracy_mean"] == pytest.approx(0.77, abs=1e-15)
    assert row["accuracy_std"] == pytest.approx(0.0067**0.5, rel=1e-12)
    assert row["accuracy_std"] == pytest.approx(statistics.stdev([0.70, 0.75, 0.86]), rel=1e-12)


def test_a_single_run_has_no_std():
    (row,) = summary_rows([private("a", 2.0, 0.6)])
    assert (row["n"], row["accuracy_mean"], row["accuracy_std"]) == (1, 0.6, None)


def test_rows_are_grouped_and_sorted_by_algorithm_then_epsilon():
    rows = summary_rows(
        [
            private("isrl_mbsgd", 4.0, 0.7),
            fedavg(0.9),
            private("isrl_mbsgd", 0.5, 0.5),
            private("dp_fedavg", 1.0, 0.6),
            private("isrl_mbsgd", 4.0, 0.8),
            fedavg(0.92),
        ]
    )
    assert [(r["algorithm"], r["target_epsilon"], r["n"]) for r in rows] == [
        ("dp_fedavg", 1.0, 1),
        ("fedavg", None, 2),
        ("isrl_mbsgd", 0.5, 1),
        ("isrl_mbsgd", 4.0, 2),
    ]
    fed = rows[1]
    assert (fed["epsilon_mean"], fed["epsilon_max"]) == (None, None)


def test_noise_multiplier_runs_are_grouped_by_it_and_placed_by_the_epsilon_spent():
    outcomes = [
        Outcome("a", "record", None, 2.0, 0.6, 1.1),
        Outcome("a", "record", None, 2.0, 0.7, 1.3),
        Outcome("a", "record", None, 1.0, 0.8, 3.0),
    ]
    rows = summary_rows(outcomes)
    assert [(r["noise_multiplier"], r["n"]) for r in rows] == [(1.0, 1), (2.0, 2)]
    assert pareto_front(rows) == [
        {"algorithm": "a", "epsilon": pytest.approx(1.2), "accuracy": pytest.approx(0.65)} | RECORD,
        {"algorithm": "a", "epsilon": 3.0, "accuracy": 0.8} | RECORD,
    ]


def test_pareto_front_of_a_hand_made_example():
    # (ε, accuracy): A(0.5, .60) B(1, .70) C(1, .65) D(2, .70) E(4, .85) F(3, .90) G(4, .90)
    # C is beaten by B (same ε, higher accuracy); D by B (lower ε, same accuracy); E and G by F.
    rows = summary_rows(
        [
            private("a", 0.5, 0.60),
            private("a", 1.0, 0.70),
            private("b", 1.0, 0.65),
            private("b", 2.0, 0.70),
            private("a", 4.0, 0.85),
            private("b", 3.0, 0.90),
            private("b", 4.0, 0.90),
            fedavg(0.99),  # the non-private reference is never on the front
        ]
    )
    assert pareto_front(rows) == [
        {"algorithm": "a", "epsilon": 0.5, "accuracy": 0.60} | RECORD,
        {"algorithm": "a", "epsilon": 1.0, "accuracy": 0.70} | RECORD,
        {"algorithm": "b", "epsilon": 3.0, "accuracy": 0.90} | RECORD,
    ]


def test_each_notion_metric_and_dataset_has_its_own_front():
    # ε of two notions, and accuracies of two metrics or on two datasets, are different units: a
    # user-level row at ε 4 is not beaten by a record-level one at ε 1, nor mnist by digits
    outcomes = [
        Outcome("a", "record", 1.0, None, 0.9, 1.0, dataset="digits"),
        Outcome("u", "user", 4.0, None, 0.5, 4.0, dataset="digits"),
        Outcome("a", "record", 2.0, None, 0.8, 2.0, dataset="mnist"),
        Outcome("c", "record", 4.0, None, 0.6, 4.0, dataset="creditcard", metric="balanced_accuracy"),
        Outcome("a", "record", 3.0, None, 0.85, 3.0, dataset="digits"),  # beaten by (1.0, 0.9)
    ]
    assert [
        (p["algorithm"], p["epsilon"], p["notion"], p["metric"], p["dataset"])
        for p in pareto_front(summary_rows(outcomes))
    ] == [
        ("a", 1.0, "record", "accuracy", "digits"),
        ("a", 2.0, "record", "accuracy", "mnist"),
        ("c", 4.0, "record", "balanced_accuracy", "creditcard"),
        ("u", 4.0, "user", "accuracy", "digits"),
    ]


def test_equal_points_are_both_on_the_front():
    rows = summary_rows([private("a", 1.0, 0.7), private("b", 1.0, 0.7)])
    assert [p["algorithm"] for p in pareto_front(rows)] == ["a", "b"]


def test_reference_is_the_non_private_rows():
    rows = summary_rows([fedavg(0.9), fedavg(0.8), private("a", 1.0, 0.5)])
    assert reference(rows) == [
        {
            "algorithm": "fedavg",
            "n": 2,
            "accuracy_mean": pytest.approx(0.85),
            "accuracy_std": pytest.approx(0.0707106781, rel=1e-9),
        }
    ]


def test_summary_csv_has_a_header_and_one_line_per_row():
    rows = summary_rows([fedavg(0.9), private("a", 1.0, 0.5, 0.97)])
    lines = list(csv.reader(io.StringIO(summary_csv(rows))))
    assert lines == [
        list(SUMMARY_COLUMNS),
        ["a", "", "record", "1.0", "", "1", "accuracy", "0.5", "", "0.97", "0.97"],
        ["fedavg", "", "none", "", "", "1", "accuracy", "0.9", "", "", ""],
    ]


def test_outcomes_in_two_metrics_are_never_averaged_together():
    balanced = Outcome("a", "user", 1.0, None, 0.75, 1.0, metric="balanced_accuracy")
    rows = summary_rows([private("a", 1.0, 0.95), balanced])
    assert [(r["metric"], r["n"], r["accuracy_mean"]) for r in rows] == [
        ("accuracy", 1, 0.95),
        ("balanced_accuracy", 1, 0.75),
    ]


def test_runs_of_two_configurations_are_two_rows_named_by_what_differs():
    # issue 40: a δ sweep at one ε is two configurations, never one row averaged as if seeds
    specs = {
        f"r{i}": {
            "algorithm": "isrl_mbsgd",
            "dataset": {"name": "digits", "silos": 4},
            "seed": seed,
            "privacy": {"epsilon": 1.0, "delta": delta},
        }
        for i, (seed, delta) in enumerate([(0, 1e-5), (1, 1e-5), (0, 0.1), (1, 0.1)])
    }
    configs = configurations(specs)
    accuracy = {"r0": 0.14, "r1": 0.16, "r2": 0.13, "r3": 0.15}
    rows = summary_rows(
        Outcome(
            "isrl_mbsgd",
            "record",
            1.0,
            None,
            accuracy[i],
            1.0,
            config=configs[i].key,
            setting=configs[i].label,
        )
        for i in specs
    )
    assert [(r["setting"], r["n"]) for r in rows] == [("δ = 0.1", 2), ("δ = 1e-5", 2)]
    assert rows[0]["accuracy_mean"] == pytest.approx(0.14) and rows[1]["accuracy_mean"] == pytest.approx(0.15)
    same = configurations({i: s for i, s in specs.items() if s["privacy"]["delta"] == 1e-5})
    assert same["r0"] == same["r1"] and same["r0"].label == ""  # seeds of one configuration


def test_compare_cells_keep_series_apart_and_list_their_runs():
    outcomes = [
        Outcome("a", "record", 1.0, None, 0.6, 1.0, run_id="r2", series="a · sweep x"),
        Outcome("a", "record", 1.0, None, 0.8, 1.0, run_id="r1", series="a · sweep x"),
        Outcome("a", "record", 1.0, None, 0.5, 1.0, run_id="r3", series="a · sweep y"),
    ]
    cells = compare_cells(outcomes)
    assert [(c["series"], c["n"], c["run_ids"]) for c in cells] == [
        ("a · sweep x", 2, ["r1", "r2"]),
        ("a · sweep y", 1, ["r3"]),
    ]
    assert cells[0]["accuracy_mean"] == pytest.approx(0.7, abs=1e-15)
    # within one sweep the series is "" and the rows are as before
    assert [r["n"] for r in summary_rows(outcomes)] == [2, 1]


def test_front_returns_the_non_dominated_points_themselves():
    points = [
        {"epsilon": 1.0, "accuracy": 0.7, "run_ids": ["a"]},
        {"epsilon": 2.0, "accuracy": 0.6, "run_ids": ["b"]},
        {"epsilon": 2.0, "accuracy": 0.9, "run_ids": ["c"]},
    ]
    assert front(points) == [points[0], points[2]]

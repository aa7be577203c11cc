"""Each dataset in its headline metric (`dpfl.data.headline_metric`, issue 44): the trade-off
figure, its exported points and the sweep summaries plot Creditcard's balanced accuracy and
MNIST's accuracy, on Postgres and SQLite, from runs stored with known round metrics."""

from __future__ import annotations

import csv
import io

import pytest

from backend.db import Database
from backend.models import RoundMetric, Run, Sweep

pytestmark = pytest.mark.service

# (id, sweep, algorithm, dataset, notion, target ε, seed, final accuracy, final balanced accuracy)
RUNS = [
    ("cc-1a", "cc", "uldp_avg", "creditcard", "user", 1.0, 0, 0.9991, 0.70),
    ("cc-1b", "cc", "uldp_avg", "creditcard", "user", 1.0, 1, 0.9993, 0.80),
    ("cc-4a", "cc", "uldp_avg", "creditcard", "user", 4.0, 0, 0.9990, 0.86),
    # recorded before balanced accuracy was: succeeded, with an accuracy, but none in its metric
    ("cc-4b", "cc", "uldp_avg", "creditcard", "user", 4.0, 1, 0.9994, None),
    ("cc-np", "cc", "fedavg", "creditcard", "none", None, 0, 0.9995, 0.90),
    ("mn-1a", "mn", "uldp_sgd", "mnist", "user", 1.0, 0, 0.80, 0.79),
    ("mn-1b", "mn", "uldp_sgd", "mnist", "user", 1.0, 1, 0.84, 0.83),
]
# Creditcard-like evaluation labels: always "not fraud" is 0.999 accurate, 0.5 balanced
HISTOGRAMS = {"creditcard": [9990, 10], "mnist": [1000] * 10}


def add_runs(settings) -> None:
    """Stores sweeps `cc` (creditcard) and `mn` (mnist), their runs succeeded, each with two evaluated
    rounds whose last holds the final accuracy and balanced accuracy of `RUNS`."""
    database = Database(settings.database_url)
    with database.session() as session:
        session.add_all(Sweep(id=s, name=s, base={}, grid={}, num_runs=0) for s in ("cc", "mn"))
        session.flush()
        for rid, sweep, algorithm, dataset, notion, target, seed, accuracy, balanced in RUNS:
            private = notion != "none"
            session.add(
                Run(
                    id=rid,
                    sweep_id=sweep,
                    status="succeeded",
                    algorithm=algorithm,
                    dataset=dataset,
                    notion=notion,
                    rounds=10,
                    target_epsilon=target,
                    epsilon=target * 0.99 if private else None,
                    delta=1e-5 if private else None,
                    accountant="rdp" if private else None,
                    final_accuracy=accuracy,
                    spec={
                        "algorithm": algorithm,
                        "dataset": {"name": dataset},
                        "privacy": {"epsilon": target, "delta": 1e-5} if private else None,
                        "seed": seed,
                    },
                    diagnostics={"test_label_histogram": HISTOGRAMS[dataset]},
                )
            )
            session.flush()
            # an earlier round whose balanced accuracy is not the final one
            session.add(RoundMetric(run_id=rid, round=5, accuracy=0.5, balanced_accuracy=0.5, loss=1.0))
            session.add(
                RoundMetric(run_id=rid, round=10, accuracy=accuracy, balanced_accuracy=balanced, loss=0.1)
            )
    database.engine.dispose()


def _means(fig: dict) -> dict[str, list[float]]:
    return {t["name"]: t["y"] for t in fig["data"] if t["meta"]["role"] == "mean"}


def test_a_creditcard_sweep_is_drawn_in_balanced_accuracy_with_its_own_chance_line(client, settings):
    add_runs(settings)
    fig = client.get("/api/figures/tradeoff", params={"sweeps": "cc"}).json()
    layout = fig["layout"]
    assert layout["yaxis"]["title"]["text"] == "test balanced accuracy"
    assert layout["title"]["text"] == "Final test balanced accuracy against ε"
    # ε 1: the mean of 0.70 and 0.80; ε 4: cc-4a alone, cc-4b has no balanced accuracy
    assert _means(fig) == {"uldp_avg": [pytest.approx(0.75, abs=1e-12), pytest.approx(0.86, abs=1e-12)]}
    (mean,) = [t for t in fig["data"] if t["meta"]["role"] == "mean"]
    assert mean["meta"]["metric"] == "balanced accuracy"
    assert mean["hovertext"][0].split("<br>")[2] == "balanced accuracy 0.750 ± 0.071"
    assert layout["meta"]["left_out"] == ["cc-4b"]
    # the non-private reference in balanced accuracy too
    (reference,) = [s for s in layout["shapes"] if s["type"] == "line" and s["line"]["dash"] == "dash"]
    assert reference["y0"] == pytest.approx(0.90, abs=1e-12)
    # a constant prediction scores 0.5 balanced (not the 0.999 majority rate), and 0.75 beats it:
    # the margin is two standard errors of a uniform guesser, records = 2² / (1/9990 + 1/10) = 39.96
    (chance,) = [s for s in layout["shapes"] if s["type"] == "line" and s["line"]["dash"] == "dot"]
    assert chance["y0"] == 0.5
    assert mean["marker"]["symbol"] == ["circle", "circle"]


def test_creditcard_and_mnist_on_one_chart_each_keep_their_metric_named_on_the_axis(client, settings):
    add_runs(settings)
    fig = client.get("/api/figures/tradeoff", params={"sweeps": "cc,mn"}).json()
    layout = fig["layout"]
    assert layout["meta"]["notions"] == ["user"]
    assert layout["yaxis"]["title"]["text"] == "test accuracy (mnist) · balanced accuracy (creditcard)"
    assert layout["title"]["text"] == "Final test accuracy and balanced accuracy against ε"
    assert _means(fig) == {
        "uldp_avg · creditcard": [pytest.approx(0.75, abs=1e-12), pytest.approx(0.86, abs=1e-12)],
        "uldp_sgd · mnist": [pytest.approx(0.82, abs=1e-12)],  # accuracy, not the balanced 0.81
    }
    assert layout["meta"]["left_out"] == ["cc-4b"]
    mnist = client.get("/api/figures/tradeoff", params={"sweeps": "mn"}).json()["layout"]
    assert (mnist["yaxis"]["title"]["text"], mnist["title"]["text"]) == (
        "test accuracy",
        "Final test accuracy against ε",
    )


def test_exported_points_say_which_metric_each_is_in(client, settings):
    add_runs(settings)
    points = client.get("/api/figures/tradeoff/points", params={"sweeps": "cc,mn"}).json()
    assert [(p["algorithm"], p["metric"], p["n"], p["accuracy_mean"]) for p in points] == [
        ("uldp_avg", "balanced_accuracy", 2, pytest.approx(0.75, abs=1e-12)),
        ("uldp_avg", "balanced_accuracy", 1, pytest.approx(0.86, abs=1e-12)),
        ("uldp_sgd", "accuracy", 2, pytest.approx(0.82, abs=1e-12)),
        ("fedavg", "balanced_accuracy", 1, pytest.approx(0.90, abs=1e-12)),
    ]
    text = client.get("/api/figures/tradeoff/points.csv", params={"sweeps": "cc,mn"}).text
    table = list(csv.DictReader(io.StringIO(text)))
    assert [(r["metric"], r["accuracy_mean"]) for r in table] == [
        ("balanced_accuracy", "0.75"),
        ("balanced_accuracy", "0.86"),
        ("accuracy", "0.8200000000000001"),  # (0.80 + 0.84) / 2 in floating point
        ("balanced_accuracy", "0.9"),
    ]


def test_a_sweep_summary_is_in_its_dataset_metric(client, settings):
    add_runs(settings)
    cc = client.get("/api/sweeps/cc/summary").json()
    assert [(r["algorithm"], r["metric"], r["n"], r["accuracy_mean"]) for r in cc["rows"]] == [
        ("fedavg", "balanced_accuracy", 1, pytest.approx(0.90, abs=1e-12)),
        # cc-4b succeeded and counts, but has no value to average
        ("uldp_avg", "balanced_accuracy", 2, pytest.approx(0.75, abs=1e-12)),
        ("uldp_avg", "balanced_accuracy", 2, pytest.approx(0.86, abs=1e-12)),
    ]
    assert cc["reference"][0]["accuracy_mean"] == pytest.approx(0.90, abs=1e-12)
    assert [(p["epsilon"], p["accuracy"]) for p in cc["pareto"]] == [
        (pytest.approx(0.99), pytest.approx(0.75, abs=1e-12)),
        (pytest.approx(3.96), pytest.approx(0.86, abs=1e-12)),
    ]
    mn = client.get("/api/sweeps/mn/summary").json()
    assert [(r["metric"], r["accuracy_mean"]) for r in mn["rows"]] == [("accuracy", pytest.approx(0.82))]
    table = list(csv.DictReader(io.StringIO(client.get("/api/sweeps/cc/summary.csv").text)))
    assert [(r["metric"], r["accuracy_mean"]) for r in table] == [
        ("balanced_accuracy", "0.9"),
        ("balanced_accuracy", "0.75"),
        ("balanced_accuracy", "0.86"),
    ]

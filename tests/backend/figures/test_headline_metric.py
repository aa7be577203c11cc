"""Each dataset in its headline metric (`dpfl.data.headline_metric`, issue 44): the trade-off
figure, its exported points, the sweep summaries, a sweep's hyperparameter charts and the run
page's "no better than guessing" flag use Creditcard's balanced accuracy and MNIST's accuracy, on
Postgres and SQLite, from runs stored with known round metrics."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

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


def add_run(
    settings, rid: str, dataset: str, accuracy: float, balanced: float, *, sweep=None, lr=0.1, seed=0
) -> None:
    """Stores one succeeded user-level run at ε 1 with one evaluated round of these values."""
    database = Database(settings.database_url)
    with database.session() as session:
        if sweep is not None and session.get(Sweep, sweep) is None:
            session.add(Sweep(id=sweep, name=sweep, base={}, grid={}, num_runs=0))
            session.flush()
        session.add(
            Run(
                id=rid,
                sweep_id=sweep,
                status="succeeded",
                algorithm="uldp_avg",
                dataset=dataset,
                notion="user",
                rounds=10,
                target_epsilon=1.0,
                epsilon=1.0,
                delta=1e-5,
                accountant="rdp",
                final_accuracy=accuracy,
                spec={
                    "algorithm": "uldp_avg",
                    "dataset": {"name": dataset},
                    "params": {"lr": lr},
                    "privacy": {"epsilon": 1.0, "delta": 1e-5},
                    "seed": seed,
                },
                diagnostics={"test_label_histogram": HISTOGRAMS[dataset]},
            )
        )
        session.flush()
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


# --- the run page's "no better than guessing" flag -------------------------------------------------


def header_texts(runs: list[dict], tmp_path: Path, function: str = "guessingText") -> list:
    """What the run page's header says of each run as the API serves it: a function of
    frontend/js/pages/run-header.js (`guessingText`: the flag; `outcomeText`: the results row), run
    by node (the frontend copied beside a package.json that makes .js a module)."""
    shutil.copytree(Path(__file__).resolve().parents[3] / "frontend/js", tmp_path / "js")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    module = tmp_path / "js/pages/run-header.js"
    script = (
        f"import {{ {function} }} from {json.dumps(module.as_uri())};"
        f"console.log(JSON.stringify({json.dumps(runs)}.map({function})));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    return json.loads(done.stdout)


def test_the_guessing_flag_judges_the_datasets_metric_against_its_chance_and_names_it(
    client, settings, tmp_path
):
    add_runs(settings)
    add_run(settings, "cc-blind", "creditcard", accuracy=0.9990, balanced=0.52)  # always "not fraud", nearly
    add_run(settings, "mn-blind", "mnist", accuracy=0.104, balanced=0.103)
    runs = {
        rid: client.get(f"/api/runs/{rid}").json()
        for rid in ("cc-1a", "cc-blind", "mn-1a", "mn-blind", "cc-np")
    }
    # Creditcard [9990, 10]: always "not fraud" is 0.999 accurate and 0.5 balanced; the margin is two
    # standard errors of a uniform guesser's balanced accuracy, 2·√(0.25 / (4 / (1/9990 + 1/10))) = 0.158.
    # cc-1a's accuracy 0.9991 is within 0.005 of 0.999 (flagged before), its balanced 0.70 is above 0.658.
    # MNIST [1000] × 10: accuracy, chance 0.1, margin 2·√(0.09 / 10,000) = 0.006.
    assert [
        (
            rid,
            r["headline_metric"],
            r["chance_baseline"],
            r["baseline_accuracy"],
            r["no_better_than_guessing"],
        )
        for rid, r in runs.items()
    ] == [
        ("cc-1a", "balanced_accuracy", 0.5, pytest.approx(0.999, abs=1e-12), False),
        ("cc-blind", "balanced_accuracy", 0.5, pytest.approx(0.999, abs=1e-12), True),
        ("mn-1a", "accuracy", pytest.approx(0.1, abs=1e-12), pytest.approx(0.1, abs=1e-12), False),
        ("mn-blind", "accuracy", pytest.approx(0.1, abs=1e-12), pytest.approx(0.1, abs=1e-12), True),
        ("cc-np", "balanced_accuracy", 0.5, pytest.approx(0.999, abs=1e-12), None),  # not private
    ]
    label = runs["cc-blind"]["baseline_label"]
    assert label.startswith("not private: ")
    assert header_texts(list(runs.values()), tmp_path) == [
        "",
        f"balanced accuracy 0.52 is no better than guessing the majority class (0.5; {label})",
        "",
        f"accuracy 0.104 is no better than guessing the majority class (0.1; {label})",
        "",
    ]
    # the results row leads with the headline metric where it is not accuracy
    outcomes = header_texts([runs["cc-blind"], runs["mn-blind"]], tmp_path / "row", "outcomeText")
    assert [label for label, _ in outcomes] == ["balanced accuracy / accuracy / loss", "accuracy / loss"]
    assert outcomes[0][1].startswith("0.52 / 0.999 / ") and outcomes[1][1].startswith("0.104 / ")


# --- a sweep's hyperparameter charts ---------------------------------------------------------------

# A Creditcard sweep over lr: lr moves balanced accuracy (0.60, 0.62 against 0.80, 0.82), not accuracy
# (0.9991 and 0.9995 at both lrs). ω² of balanced accuracy: mean 0.71, SS_between = 4 · 0.1² = 0.04,
# SS_within = 4 · 0.01² = 0.0004 over 2 degrees of freedom, so (0.04 − 0.0002) / (0.0404 + 0.0002);
# of accuracy it is 0 (equal group means).
HP_RUNS = [
    ("hp-a", 0.1, 0, 0.9991, 0.60),
    ("hp-b", 0.1, 1, 0.9995, 0.62),
    ("hp-c", 0.2, 0, 0.9995, 0.80),
    ("hp-d", 0.2, 1, 0.9991, 0.82),
]


def add_hp_sweep(settings) -> None:
    for rid, lr, seed, accuracy, balanced in HP_RUNS:
        add_run(settings, rid, "creditcard", accuracy, balanced, sweep="hp", lr=lr, seed=seed)


def test_a_creditcard_sweeps_parallel_coordinates_are_in_balanced_accuracy(client, settings):
    add_hp_sweep(settings)
    (trace,) = client.get("/api/sweeps/hp/figures/parcoords").json()["data"]
    assert [d["label"] for d in trace["dimensions"]] == [
        "params.lr",
        "seed",
        "ε spent",
        "final balanced accuracy",
    ]
    assert trace["dimensions"][3]["values"] == [0.60, 0.62, 0.80, 0.82]
    assert trace["line"]["color"] == [0.60, 0.62, 0.80, 0.82]
    assert (trace["line"]["cmin"], trace["line"]["cmax"]) == (0.60, 0.82)
    assert trace["line"]["colorbar"]["title"]["text"] == "final balanced accuracy"
    # cc's run without balanced accuracy is not drawn and is named, beside its non-private run
    add_runs(settings)
    fig = client.get("/api/sweeps/cc/figures/parcoords").json()
    assert fig["data"][0]["dimensions"][-1]["values"] == [0.70, 0.80, 0.86]
    assert fig["layout"]["meta"]["run_ids"] == ["cc-1a", "cc-1b", "cc-4a"]
    assert fig["layout"]["meta"]["left_out"] == ["cc-np", "cc-4b"]
    assert fig["layout"]["title"]["subtitle"]["text"] == (
        "3 runs of sweep cc · 1 non-private run not drawn · 1 without balanced accuracy not drawn"
    )
    mnist = client.get("/api/sweeps/mn/figures/parcoords").json()["data"][0]
    assert (mnist["dimensions"][-1]["label"], mnist["dimensions"][-1]["values"]) == (
        "final accuracy",
        [0.80, 0.84],
    )


def test_a_creditcard_sweeps_importance_ranks_by_balanced_accuracy(client, settings):
    add_hp_sweep(settings)
    fig = client.get("/api/sweeps/hp/figures/importance").json()
    assert fig["layout"]["meta"]["importance"] == [
        {
            "parameter": "params.lr",
            "share": pytest.approx(0.0398 / 0.0406, rel=1e-9),
            "levels": 2,
            "left_out": None,
        }
    ]
    assert fig["layout"]["title"]["text"] == (
        "Share of the variance of final balanced accuracy explained by each hyperparameter (ω²)"
    )

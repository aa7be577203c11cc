"""Compare figures: panels per privacy notion, subtitles, the majority-class baseline, drill-down
curves, and a sweep's parallel coordinates and hyperparameter importance."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dpfl.plots import (
    GUESSING_MARGIN,
    accuracy_vs_spent,
    algorithm_colour,
    band_limits,
    chance_baseline,
    compare_subtitle,
    flatten,
    guessing_margin,
    importance,
    importance_bars,
    majority_accuracy,
    metric_per_round,
    no_better_than_guessing,
    outcome_title,
    parallel_coordinates,
    run_baseline,
    smoothed,
    to_json,
    tradeoff,
)

RECORD = [
    {
        "algorithm": "isrl_mbsgd",
        "notion": "record",
        "delta": 1e-5,
        "epsilon": e,
        "mean": m,
        "std": 0.01,
        "n": 2,
    }
    for e, m in ((1.0, 0.6), (4.0, 0.8))
]
USER = [
    {"algorithm": "uldp_avg", "notion": "user", "delta": 1e-5, "epsilon": e, "mean": m, "std": None, "n": 1}
    for e, m in ((1.0, 0.5), (4.0, 0.7))
]
MIXED_WARNING = (
    "These runs use 2 privacy notions (record-level DP, user-level DP). Their ε are different units, "
    "so each notion has its own panel: do not compare ε across panels."
)


def _traces(fig: dict, role: str) -> list[dict]:
    return [t for t in fig["data"] if t["meta"]["role"] == role]


# --- the notion on every axis ---------------------------------------------------------------------


def test_mixed_notions_get_one_panel_each_with_the_notion_on_its_axis():
    fig = to_json(tradeoff(USER + RECORD, log_x=False))
    layout = fig["layout"]
    assert layout["xaxis"]["title"]["text"] == "ε (record-level DP), δ = 1e-5"
    assert layout["xaxis2"]["title"]["text"] == "ε (user-level DP), δ = 1e-5"
    assert "xaxis3" not in layout
    assert layout["meta"] == {"figure": "tradeoff", "notions": ["record", "user"], "warning": MIXED_WARNING}
    means = _traces(fig, "mean")
    assert [(t["name"], t["xaxis"], t["yaxis"], t["meta"]["notion"]) for t in means] == [
        ("isrl_mbsgd", "x", "y", "record"),
        ("uldp_avg", "x2", "y2", "user"),
    ]
    assert layout["yaxis2"]["matches"] == "y"  # one accuracy scale across the panels


def test_one_notion_is_one_panel_named_on_its_axis():
    fig = to_json(tradeoff(USER))
    assert fig["layout"]["xaxis"]["title"]["text"] == "ε (user-level DP), δ = 1e-5"
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert fig["layout"]["meta"] == {"figure": "tradeoff", "notions": ["user"], "warning": None}
    mixed_delta = [USER[0], {**USER[1], "delta": 1e-6}]
    title = to_json(tradeoff(mixed_delta))["layout"]["xaxis"]["title"]["text"]
    assert title == "ε (user-level DP), δ mixed: 1e-6, 1e-5"


def test_a_reference_line_spans_every_panel_and_is_labelled_once():
    ref = {"algorithm": "fedavg", "mean": 0.9, "std": None, "n": 1}
    layout = to_json(tradeoff(USER + RECORD, reference=ref))["layout"]
    lines = [s for s in layout["shapes"] if s["type"] == "line"]
    assert [(s["xref"], s["y0"]) for s in lines] == [("x domain", 0.9), ("x2 domain", 0.9)]
    assert [a["text"] for a in layout["annotations"]] == ["non-private fedavg: 0.9"]


def test_reference_lines_are_drawn_only_in_the_panels_of_their_datasets_runs():
    # panels: record-level (x), user-level (x2); heart's runs are user-level only, digits' record-level
    ref = {"algorithm": "fedavg", "mean": 0.9, "std": None, "n": 1, "notions": ["user"]}
    baselines = [
        {"accuracy": 0.1, "label": "digits", "notions": ["record"]},
        {"accuracy": 0.55, "label": "heart", "notions": ["user"]},
    ]
    layout = to_json(tradeoff(USER + RECORD, reference=ref, baselines=baselines))["layout"]
    lines = [(s["xref"], s["y0"]) for s in layout["shapes"] if s["type"] == "line"]
    assert lines == [("x2 domain", 0.9), ("x domain", 0.1), ("x2 domain", 0.55)]
    assert [a["text"] for a in layout["annotations"]] == [
        "non-private fedavg: 0.9",
        "majority class, digits: 0.1 (not private)",
        "majority class, heart: 0.55 (not private)",
    ]


def test_the_pareto_frontier_is_drawn_per_panel():
    pareto = [{**p, "run_ids": ["a"]} for p in RECORD] + [USER[1]]
    fig = to_json(tradeoff(USER + RECORD, pareto=pareto))
    frontiers = _traces(fig, "pareto")
    assert [(t["xaxis"], t["x"], t["showlegend"]) for t in frontiers] == [
        ("x", [1.0, 4.0], True),
        ("x2", [4.0], False),
    ]
    assert frontiers[0]["customdata"] == [["isrl_mbsgd", 1.0, ["a"]], ["isrl_mbsgd", 4.0, ["a"]]]


def test_spent_figure_mixing_notions_gets_a_panel_per_notion():
    rounds = [{"round": r, "accuracy": 0.1 * r, "epsilon": 0.5 * r} for r in (1, 2)]
    runs = [
        {
            "id": "a",
            "algorithm": "isrl_mbsgd",
            "label": "a",
            "notion": "record",
            "delta": 1e-5,
            "rounds": rounds,
        },
        {"id": "b", "algorithm": "uldp_avg", "label": "b", "notion": "user", "delta": 1e-6, "rounds": rounds},
        {
            "id": "c",
            "algorithm": "fedavg",
            "label": "c",
            "notion": "none",
            "rounds": [{"round": 1, "accuracy": 0.9}],
        },
    ]
    fig = to_json(accuracy_vs_spent(runs))
    assert fig["layout"]["xaxis"]["title"]["text"] == "ε (record-level DP), δ = 1e-5"
    assert fig["layout"]["xaxis2"]["title"]["text"] == "ε (user-level DP), δ = 1e-6"
    assert fig["layout"]["meta"]["notions"] == ["record", "user"]
    assert fig["layout"]["meta"]["warning"] == MIXED_WARNING
    assert [(t["meta"]["run_id"], t["xaxis"]) for t in fig["data"][:2]] == [("a", "x"), ("b", "x2")]
    one = to_json(accuracy_vs_spent(runs[:1]))["layout"]
    assert one["xaxis"]["title"]["text"] == "ε (record-level DP), δ = 1e-5"
    assert one["meta"]["warning"] is None


# --- subtitle -------------------------------------------------------------------------------------


def test_subtitle_names_dataset_delta_rounds_and_accountant_or_says_mixed():
    same = [{"dataset": "digits", "delta": 1e-5, "rounds": 30, "accountant": "rdp"}] * 2
    assert compare_subtitle(same) == "digits · δ = 1e-5 · 30 rounds · rdp"
    mixed = [
        {"dataset": "digits", "delta": 1e-5, "rounds": 30, "accountant": "rdp"},
        {"dataset": "heart", "delta": 1e-6, "rounds": 20, "accountant": "pld"},
        {"dataset": "digits", "delta": None, "rounds": 30, "accountant": None},  # non-private
    ]
    assert compare_subtitle(mixed) == (
        "datasets mixed: digits, heart · δ mixed: 1e-6, 1e-5 · rounds mixed: 20, 30 · "
        "accountants mixed: pld, rdp"
    )
    fig = to_json(tradeoff(RECORD, subtitle=compare_subtitle(same)))
    assert fig["layout"]["title"]["subtitle"]["text"] == "digits · δ = 1e-5 · 30 rounds · rdp"
    assert fig["layout"]["title"]["text"] == "Final test accuracy against ε"
    assert "subtitle" not in to_json(tradeoff(RECORD))["layout"]["title"]


def test_the_y_axis_names_the_points_metric_and_each_with_its_datasets_when_they_mix():
    balanced = [{**p, "metric": "balanced_accuracy", "datasets": ["creditcard"]} for p in USER]
    layout = to_json(tradeoff(balanced))["layout"]
    assert (layout["yaxis"]["title"]["text"], layout["title"]["text"]) == (
        "test balanced accuracy",
        "Final test balanced accuracy against ε",
    )
    assert _traces(to_json(tradeoff(balanced)), "mean")[0]["hovertext"][0].split("<br>")[2] == (
        "balanced accuracy 0.500"
    )
    mixed = [*balanced, *({**p, "datasets": ["mnist"]} for p in RECORD)]  # no metric: accuracy
    layout = to_json(tradeoff(mixed))["layout"]
    assert layout["yaxis"]["title"]["text"] == "test accuracy (mnist) · balanced accuracy (creditcard)"
    assert layout["title"]["text"] == "Final test accuracy and balanced accuracy against ε"
    assert to_json(tradeoff([]))["layout"]["yaxis"]["title"]["text"] == "test accuracy"


# --- single points, series --------------------------------------------------------------------------


def test_a_series_of_one_point_draws_a_marker():
    (line,) = _traces(to_json(tradeoff([RECORD[0]])), "mean")
    assert (line["mode"], line["x"], line["y"]) == ("lines+markers", [1.0], [0.6])
    assert line["marker"]["symbol"] == ["circle"] and line["marker"]["size"] == [7]


def test_one_algorithm_in_two_series_keeps_its_colour_and_changes_dash():
    points = [{**p, "series": f"isrl_mbsgd · {s}"} for s in ("sweep a", "sweep b") for p in RECORD]
    means = _traces(to_json(tradeoff(points)), "mean")
    assert [t["name"] for t in means] == ["isrl_mbsgd · sweep a", "isrl_mbsgd · sweep b"]
    assert {t["line"]["color"] for t in means} == {algorithm_colour("isrl_mbsgd")}
    assert [t["line"]["dash"] for t in means] == ["solid", "dash"]


# --- majority-class baseline -----------------------------------------------------------------------


def test_majority_accuracy_and_the_guessing_margin():
    assert majority_accuracy([3, 5, 2]) == {"accuracy": 0.5, "records": 10}
    assert majority_accuracy([]) is None and majority_accuracy(None) is None
    assert GUESSING_MARGIN == 0.005
    # digits' evaluation set: 37 of 359 records in its commonest class; 2 standard errors = 3.2 points
    assert guessing_margin(37 / 359, 359) == pytest.approx(2 * (37 / 359 * 322 / 359 / 359) ** 0.5, rel=1e-12)
    assert guessing_margin(37 / 359, 359) == pytest.approx(0.03209, abs=1e-5)
    assert guessing_margin(0.5, 1_000_000) == 0.005  # a huge evaluation set: the floor
    digits = {"accuracy": 37 / 359, "records": 359}
    assert no_better_than_guessing(0.109, digits) is True  # uldp_avg on digits (issue 18)
    assert no_better_than_guessing(0.136, digits) is False
    big = {"accuracy": 0.5, "records": 1_000_000}
    assert no_better_than_guessing(0.505, big) is True and no_better_than_guessing(0.5051, big) is False
    assert no_better_than_guessing(None, digits) is None and no_better_than_guessing(0.6, None) is None
    assert run_baseline({"withheld": True}) is None  # a protected run shows no baseline
    assert run_baseline({"withheld": False, "test_label_histogram": [1, 3]}) == {
        "accuracy": 0.75,
        "records": 4,
    }
    assert run_baseline({"withheld": False}) is None  # recorded before the diagnostic existed


def test_the_chance_baseline_of_balanced_accuracy_is_one_over_the_classes_present():
    assert chance_baseline([3, 5, 2]) == majority_accuracy([3, 5, 2])
    baseline = chance_baseline([9990, 0, 10], "balanced_accuracy")
    assert baseline == {"accuracy": 0.5, "records": pytest.approx(4 / (1 / 9990 + 1 / 10), rel=1e-12)}
    assert chance_baseline([0, 0], "balanced_accuracy") is None
    assert chance_baseline(None, "balanced_accuracy") is None
    # the margin is two standard deviations of a uniform guesser's balanced accuracy: simulated
    rng = np.random.default_rng(0)
    guessed = (rng.binomial(9990, 0.5, 200_000) / 9990 + rng.binomial(10, 0.5, 200_000) / 10) / 2
    margin = guessing_margin(baseline["accuracy"], baseline["records"])
    assert margin == pytest.approx(0.15819, abs=1e-5)
    assert margin == pytest.approx(2 * guessed.std(), rel=0.01)
    assert no_better_than_guessing(0.65, baseline) is True
    assert no_better_than_guessing(0.66, baseline) is False
    # a run's, from its diagnostics, in its dataset's metric (the run page's flag)
    assert run_baseline({"test_label_histogram": [9990, 0, 10]}, "balanced_accuracy") == baseline
    assert run_baseline({"test_label_histogram": [9990, 0, 10]}) == {"accuracy": 0.999, "records": 10000}


def test_points_no_better_than_guessing_are_crosses_and_say_so():
    points = [
        {"algorithm": "uldp_avg", "notion": "user", "epsilon": 1.0, "mean": 0.109, "std": None, "n": 1},
        {"algorithm": "uldp_avg", "notion": "user", "epsilon": 4.0, "mean": 0.6, "std": None, "n": 1},
    ]
    baseline = {"accuracy": 37 / 359, "records": 359}
    fig = to_json(
        tradeoff(
            [{**p, "baseline": baseline} for p in points],
            baselines=[{"accuracy": 37 / 359, "label": None}],
        )
    )
    (line,) = _traces(fig, "mean")
    assert line["marker"]["symbol"] == ["x", "circle"]
    assert line["marker"]["size"] == [10, 7]
    assert line["hovertext"][0] == (
        "<b>uldp_avg</b><br>ε = 1<br>accuracy 0.109<br>1 seed"
        "<br>no better than guessing: majority class 0.103 (not private)"
    )
    assert "guessing" not in line["hovertext"][1]
    (dotted,) = [s for s in fig["layout"]["shapes"] if s["line"]["dash"] == "dot"]
    assert dotted["y0"] == dotted["y1"] == 37 / 359
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["majority class: 0.103 (not private)"]


# --- drill-down curves ------------------------------------------------------------------------------


def test_accuracy_per_round_colours_by_algorithm_and_dashes_by_seed():
    rounds = [{"round": r, "accuracy": 0.1 * r} for r in (2, 1)]
    runs = [
        {"id": "a", "algorithm": "isrl_mbsgd", "seed": 0, "label": "isrl_mbsgd seed 0", "rounds": rounds},
        {"id": "b", "algorithm": "isrl_mbsgd", "seed": 1, "label": "isrl_mbsgd seed 1", "rounds": rounds},
        {"id": "c", "algorithm": "uldp_avg", "seed": 1, "label": "uldp_avg seed 1", "rounds": rounds},
    ]
    fig = to_json(metric_per_round(runs, subtitle="digits"))
    assert [t["line"]["dash"] for t in fig["data"]] == ["solid", "dash", "dash"]
    assert [t["line"]["color"] for t in fig["data"]] == [
        algorithm_colour(a) for a in ("isrl_mbsgd",) * 2 + ("uldp_avg",)
    ]
    assert fig["data"][0]["x"] == [1, 2] and fig["data"][0]["y"] == pytest.approx([0.1, 0.2])
    assert fig["data"][2]["customdata"] == [["c", 1], ["c", 2]]
    assert fig["data"][1]["meta"] == {"role": "run", "run_id": "b", "algorithm": "isrl_mbsgd", "seed": 1}
    assert fig["layout"]["meta"]["figure"] == "accuracy_per_round"
    assert fig["layout"]["xaxis"]["title"]["text"] == "round"
    assert fig["layout"]["title"]["subtitle"]["text"] == "digits"


def test_an_overlay_draws_any_metric_with_log_y_and_smoothing_over_faint_raw_values():
    rounds = [
        {"round": r, "loss": v, "train_loss": None} for r, v in ((1, 2.0), (2, 1.0), (3, None), (4, 0.5))
    ]
    runs = [{"id": "a", "algorithm": "isrl_mbsgd", "seed": 0, "label": "a", "rounds": rounds}]
    fig = to_json(metric_per_round(runs, metric="loss", log_y=True, smoothing=0.5))
    raw, line = fig["data"]
    assert raw["meta"]["role"] == "raw" and raw["opacity"] == 0.3 and raw["y"] == [2.0, 1.0, None, 0.5]
    # debiased EMA with weight 0.5: the averages 1, 1, (the gap keeps it), 0.75 over 1 − 0.5ⁿ
    assert line["y"] == pytest.approx([2.0, 4 / 3, None, 6 / 7])
    assert line["meta"]["role"] == "run" and line["mode"] == "lines"
    assert fig["layout"]["yaxis"]["type"] == "log" and fig["layout"]["meta"]["figure"] == "loss_per_round"
    assert fig["layout"]["yaxis"]["title"]["text"] == "test loss"
    train = to_json(metric_per_round(runs, metric="train_loss"))
    assert train["layout"]["title"]["text"].startswith("Training loss per round (not private)")
    assert smoothed([1.0, 3.0], 0.0) == [1.0, 3.0]
    with pytest.raises(
        ValueError,
        match="metric must be one of accuracy, balanced_accuracy, loss, train_loss, epsilon; got 'f1'",
    ):
        metric_per_round(runs, metric="f1")
    with pytest.raises(ValueError, match=r"smoothing must be in \[0, 1\); got 1"):
        smoothed([1.0], 1)


# --- hyperparameter importance and parallel coordinates ----------------------------------------------

# A balanced 2 × 2 × 2 grid where accuracy = a[lr] + b[clip] and the seed does nothing: the deviations
# from the mean are ±0.1 (lr) and ±0.05 (clip), so SS_lr = 8 · 0.01 = 0.08, SS_clip = 8 · 0.0025 = 0.02
# of SS_total = 0.10 (η² 0.8 and 0.2). ω² takes off what chance puts between 2 groups of 8 runs:
# lr (0.08 − 0.02/6) / (0.10 + 0.02/6) = 0.7419…, clip (0.02 − 0.08/6) / (0.10 + 0.08/6) = 0.0588….
# The seed is the sweep's repetition, never a hyperparameter.
EFFECT_LR = {0.1: 0.5, 0.2: 0.7}
EFFECT_CLIP = {1.0: 0.0, 2.0: 0.1}
GRID_RUNS = [
    {
        "id": f"r{i}",
        "params": {"params.lr": lr, "params.clip": clip, "seed": seed, "rounds": 30},
        "epsilon": 2.0,
        "accuracy": EFFECT_LR[lr] + EFFECT_CLIP[clip],
    }
    for i, (lr, clip, seed) in enumerate(itertools.product(EFFECT_LR, EFFECT_CLIP, (0, 1)))
]


def test_importance_recovers_the_known_variance_shares_less_chance():
    shares = importance(GRID_RUNS)
    assert [(e["parameter"], e["levels"], e["left_out"]) for e in shares] == [
        ("params.lr", 2, None),
        ("params.clip", 2, None),
    ]
    assert [e["share"] for e in shares] == pytest.approx([0.23 / 0.31, 0.02 / 0.34], abs=1e-12)


def test_a_sweep_over_epsilon_and_seed_gives_importance_to_no_hyperparameter():
    # σ calibrated from each ε target: it and the target vary with the outcome, and are its x axis
    runs = [
        {
            "params": {"privacy.epsilon": eps, "noise_multiplier": 8.0 / eps, "seed": seed, "params.lr": 0.5},
            "accuracy": 0.5 + 0.05 * eps + 0.01 * seed,
        }
        for eps, seed in itertools.product((1.0, 2.0, 4.0), (0, 1, 2))
    ]
    assert importance(runs) == []
    fig = to_json(importance_bars(importance(runs)))
    assert [a["text"] for a in fig["layout"]["annotations"]][-1] == (
        "no hyperparameter varies on its own between finished runs"
    )


def test_a_field_the_algorithm_sets_is_left_out_as_the_algorithms_share():
    # each algorithm runs at its own default lr: lr "explains" exactly what the algorithm does
    runs = [
        {"params": {"algorithm": a, "params.lr": lr, "params.clip": clip}, "accuracy": acc + 0.1 * clip}
        for (a, lr, acc), clip in itertools.product(
            (("isrl_mbsgd", 0.5, 0.7), ("dp_fedavg", 0.05, 0.5)), (1.0, 2.0, 1.0, 2.0)
        )
    ]
    shares = {e["parameter"]: e for e in importance(runs)}
    assert (shares["params.lr"]["share"], shares["params.lr"]["left_out"]) == (None, "set by the algorithm")
    assert shares["algorithm"]["share"] > shares["params.clip"]["share"] > 0
    fig = to_json(importance_bars(importance(runs)))
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["left out, set by the algorithm: params.lr"]


def test_importance_leaves_out_a_parameter_with_a_value_per_run_and_handles_categories():
    runs = [
        {"params": {"algorithm": a, "tag": i}, "accuracy": acc}
        for i, (a, acc) in enumerate(
            (("isrl_mbsgd", 0.6), ("isrl_mbsgd", 0.8), ("uldp_avg", 0.2), ("uldp_avg", 0.2))
        )
    ]
    # mean 0.45; group means 0.7 and 0.2: SS_between = 2·0.0625 · 2 = 0.25 of SS_total = 0.27,
    # SS_within 0.02 over 2 degrees of freedom: ω² = (0.25 − 0.01) / (0.27 + 0.01)
    assert importance(runs) == [
        {
            "parameter": "algorithm",
            "share": pytest.approx(0.24 / 0.28, rel=1e-12),
            "levels": 2,
            "left_out": None,
        },
        {"parameter": "tag", "share": None, "levels": 4, "left_out": "a distinct value in every run"},
    ]
    fig = to_json(importance_bars(importance(runs), labels={"algorithm": "algorithm name"}))
    (bars,) = fig["data"]
    assert (bars["orientation"], bars["y"], bars["customdata"]) == (
        "h",
        ["algorithm name"],
        [["algorithm", 2]],
    )
    assert bars["x"] == pytest.approx([0.24 / 0.28])
    assert [a["text"] for a in fig["layout"]["annotations"]] == [
        "left out, a distinct value in every run: tag"
    ]
    assert fig["layout"]["xaxis"]["range"] == [0, 1]


def test_parallel_coordinates_has_one_axis_per_varying_parameter_then_epsilon_and_accuracy():
    runs = [
        {**run, "params": {**run["params"], "algorithm": "isrl_mbsgd" if i % 2 else "fedavg"}}
        for i, run in enumerate(GRID_RUNS[:4])
    ]
    runs[0]["params"]["params.momentum"] = 0.9  # only one algorithm has it
    fig = to_json(parallel_coordinates(runs, labels={"params.lr": "lr"}))
    (trace,) = fig["data"]
    dims = trace["dimensions"]
    assert [d["label"] for d in dims] == [
        "algorithm",
        "params.clip",
        "params.momentum",
        "seed",
        "ε spent",
        "final accuracy",
    ]  # lr does not vary in these four runs
    assert dims[0]["values"] == [0, 1, 0, 1]
    assert (dims[0]["tickvals"], dims[0]["ticktext"]) == ([0, 1], ["fedavg", "isrl_mbsgd"])
    assert dims[1]["values"] == [1.0, 1.0, 2.0, 2.0] and "tickvals" not in dims[1]
    assert dims[2]["ticktext"] == ["0.9", "–"] and dims[2]["values"] == [0, 1, 1, 1]
    assert dims[3]["values"] == [0.0, 1.0, 0.0, 1.0]
    assert dims[5]["values"] == pytest.approx([0.5, 0.5, 0.6, 0.6])
    assert trace["line"]["color"] == dims[5]["values"]
    assert fig["layout"]["meta"]["run_ids"] == ["r0", "r1", "r2", "r3"]


def test_parallel_coordinates_without_epsilon_everywhere_has_no_epsilon_axis():
    runs = [{**GRID_RUNS[0], "epsilon": None}, GRID_RUNS[2]]
    labels = [d["label"] for d in to_json(parallel_coordinates(runs))["data"][0]["dimensions"]]
    assert labels == ["params.clip", "final accuracy"]


def test_hyperparameter_charts_name_the_runs_metric_and_each_with_its_datasets_when_they_mix():
    creditcard = [{**run, "metric": "balanced_accuracy", "dataset": "creditcard"} for run in GRID_RUNS[:4]]
    assert outcome_title(creditcard) == "final balanced accuracy"
    assert outcome_title(GRID_RUNS) == outcome_title([]) == "final accuracy"
    mixed = creditcard + [{**run, "metric": "accuracy", "dataset": "mnist"} for run in GRID_RUNS[4:]]
    title = "final accuracy (mnist) · balanced accuracy (creditcard)"
    assert outcome_title(mixed) == title
    (trace,) = to_json(parallel_coordinates(mixed))["data"]
    assert (trace["dimensions"][-1]["label"], trace["line"]["colorbar"]["title"]["text"]) == (title, title)
    bars = to_json(importance_bars(importance(mixed), outcome=title))
    assert (
        bars["layout"]["title"]["text"]
        == f"Share of the variance of {title} explained by each hyperparameter (ω²)"
    )


def test_flatten_gives_dotted_keys_and_keeps_lists_whole():
    spec = {"algorithm": "a", "params": {"lr": 0.1}, "model": {"hidden": [64]}, "privacy": None}
    assert flatten(spec) == {"algorithm": "a", "params.lr": 0.1, "model.hidden": [64], "privacy": None}


@pytest.mark.parametrize(
    "build",
    [
        lambda: tradeoff(USER + RECORD, baselines=[{"accuracy": 0.1, "label": "digits"}]),
        lambda: metric_per_round([]),
        lambda: parallel_coordinates(GRID_RUNS),
        lambda: parallel_coordinates([]),
        lambda: importance_bars(importance(GRID_RUNS)),
    ],
)
def test_compare_figures_round_trip_through_strict_json(build):
    fig = to_json(build())
    assert json.loads(json.dumps(fig, allow_nan=False)) == fig


def test_a_chart_with_only_non_private_runs_says_no_private_run_has_finished():
    ref = {"algorithm": "fedavg", "mean": 0.9, "std": None, "n": 2}
    fig = to_json(tradeoff([], reference=ref))
    assert [a["text"] for a in fig["layout"]["annotations"]][-1] == "no private run has finished yet"


def test_each_band_is_computed_from_the_points_runs():
    point = {
        "algorithm": "isrl_mbsgd",
        "mean": 0.5,
        "std": 0.1,
        "n": 4,
        "members": [["a", 1.0, 0.4], ["b", 1.0, 0.45], ["c", 1.1, 0.55], ["d", 1.0, 0.6]],
    }
    assert band_limits(point, "std") == pytest.approx((0.4, 0.6))
    assert band_limits(point, "se") == pytest.approx((0.45, 0.55))
    assert band_limits(point, "ci95") == pytest.approx((0.5 - 3.182446 * 0.05, 0.5 + 3.182446 * 0.05))  # t₃
    assert band_limits(point, "minmax") == (0.4, 0.6)
    assert band_limits({**point, "std": None, "n": 1, "members": point["members"][:1]}, "ci95") == (0.5, 0.5)


def test_a_chosen_band_and_each_run_are_drawn():
    cells = [
        {
            **p,
            "notion": "record",
            "members": [
                [f"r{p['epsilon']}{i}", p["epsilon"], p["mean"] + d] for i, d in ((0, -0.01), (1, 0.01))
            ],
        }
        for p in RECORD
    ]
    fig = to_json(tradeoff(cells, band="minmax", individual=True))
    (band,) = _traces(fig, "band")
    assert (band["name"], band["meta"]["band"]) == ("isrl_mbsgd min–max", "minmax")
    assert band["y"] == pytest.approx([0.61, 0.81, 0.79, 0.59])  # upper edge, then the lower edge back
    (runs,) = _traces(fig, "run")
    assert runs["y"] == pytest.approx([0.59, 0.61, 0.79, 0.81]) and runs["mode"] == "markers"
    assert runs["customdata"][0] == ["isrl_mbsgd", 1.0, ["r1.00"]]

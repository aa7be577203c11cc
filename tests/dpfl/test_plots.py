"""Figures: colours per algorithm, the trade-off chart's traces, per-run and per-party figures, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dpfl.algorithms import algorithm_class, registered_algorithms
from dpfl.plots import (
    NEUTRAL_COLOUR,
    accuracy_vs_spent,
    algorithm_colour,
    epsilon_per_party,
    label_histogram,
    learning_curves,
    metric_per_round,
    to_json,
    tradeoff,
    user_distribution,
)

FUTURE_NAMES = [
    "isrl_localsgd",
    "isrl_spider",
    "isrl_proxsgd",
    "gdp_localnewton",
    "gdp_gd",
    "ae_dpfl",
    "knn_dpfl",
    "dp_fedavg",
    "dp_fedsgd",
    "uldp_avg",
    "uldp_sgd",
]

# Two algorithms × three ε, listed out of ε order on purpose; one cell has a single seed (std None).
SWEEP = [
    {"algorithm": "isrl_mbsgd", "epsilon": 8.0, "mean": 0.80, "std": 0.01, "n": 3},
    {"algorithm": "isrl_mbsgd", "epsilon": 0.5, "mean": 0.60, "std": 0.04, "n": 3},
    {"algorithm": "isrl_mbsgd", "epsilon": 2.0, "mean": 0.70, "std": None, "n": 1},
    {"algorithm": "uldp_avg", "epsilon": 2.0, "mean": 0.76, "std": 0.02, "n": 3},
    {"algorithm": "uldp_avg", "epsilon": 8.0, "mean": 0.84, "std": 0.03, "n": 3},
    {"algorithm": "uldp_avg", "epsilon": 0.5, "mean": 0.55, "std": 0.05, "n": 3},
]
REFERENCE = {"algorithm": "fedavg", "mean": 0.87, "std": 0.005, "n": 3}
PARETO = [
    {"algorithm": "uldp_avg", "epsilon": 8.0, "mean": 0.84},
    {"algorithm": "isrl_mbsgd", "epsilon": 0.5, "mean": 0.60},
    {"algorithm": "uldp_avg", "epsilon": 2.0, "mean": 0.76},
]


def _traces(fig: dict, role: str) -> list[dict]:
    return [t for t in fig["data"] if t["meta"]["role"] == role]


@pytest.fixture(scope="module")
def sweep_figure() -> dict:
    return to_json(tradeoff(SWEEP, reference=REFERENCE, pareto=PARETO))


# --- colours -------------------------------------------------------------------------------------


def test_registered_algorithms_get_distinct_colours():
    private = [n for n in registered_algorithms() if algorithm_class(n).notion != "none"]
    assert len({algorithm_colour(n) for n in private}) == len(private) >= 16
    assert NEUTRAL_COLOUR not in {algorithm_colour(n) for n in private}


def test_plausible_future_algorithms_get_distinct_colours():
    names = list(dict.fromkeys([*registered_algorithms(), *FUTURE_NAMES]))
    colours = [algorithm_colour(n) for n in names]
    # 20 catalogue colours for the private algorithms: distinct until both palettes are full;
    # the non-private references are the neutral grey.
    references = [n for n in names if algorithm_colour(n) == NEUTRAL_COLOUR]
    assert references == ["fedavg", "fedavg_2lr", "localnewton"]
    assert len(set(colours) - {NEUTRAL_COLOUR}) == min(len(names) - len(references), 20)


def test_fedavg_is_a_neutral_dark_grey():
    colour = algorithm_colour("fedavg")
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    assert colour == NEUTRAL_COLOUR
    assert r == g == b < 0x80


def test_colours_are_the_same_in_another_process_with_another_hash_seed():
    names = [*registered_algorithms(), *FUTURE_NAMES, "uldp_group", "not_registered_yet"]
    script = f"from dpfl.plots import algorithm_colour; print([algorithm_colour(n) for n in {names!r}])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str([algorithm_colour(n) for n in names])


# --- trade-off chart ----------------------------------------------------------------------------


def test_tradeoff_has_one_line_per_algorithm_through_its_means_in_epsilon_order(sweep_figure):
    lines = _traces(sweep_figure, "mean")
    assert [t["name"] for t in lines] == ["isrl_mbsgd", "uldp_avg"]
    assert lines[0]["x"] == [0.5, 2.0, 8.0]
    assert lines[0]["y"] == [0.60, 0.70, 0.80]
    assert lines[1]["x"] == [0.5, 2.0, 8.0]
    assert lines[1]["y"] == [0.55, 0.76, 0.84]
    assert lines[0]["mode"] == "lines+markers"
    assert lines[0]["line"]["color"] == algorithm_colour("isrl_mbsgd")


def test_tradeoff_points_carry_algorithm_epsilon_and_run_ids_for_clicks(sweep_figure):
    line = _traces(sweep_figure, "mean")[1]
    assert line["customdata"] == [["uldp_avg", 0.5, []], ["uldp_avg", 2.0, []], ["uldp_avg", 8.0, []]]
    assert line["hovertext"][0] == "<b>uldp_avg</b><br>ε = 0.5<br>accuracy 0.550 ± 0.050<br>3 seeds"
    assert sweep_figure["layout"]["meta"] == {"figure": "tradeoff", "notions": [], "warning": None}
    picked = [{**SWEEP[0], "run_ids": ["r1", "r2", "r3"]}]
    (mean,) = _traces(to_json(tradeoff(picked)), "mean")
    assert mean["customdata"] == [["isrl_mbsgd", 8.0, ["r1", "r2", "r3"]]]


def test_tradeoff_band_edges_are_mean_plus_and_minus_std(sweep_figure):
    bands = {t["meta"]["algorithm"]: t for t in _traces(sweep_figure, "band")}
    assert sorted(bands) == ["isrl_mbsgd", "uldp_avg"]
    for algorithm, band in bands.items():
        cells = sorted((p for p in SWEEP if p["algorithm"] == algorithm), key=lambda p: p["epsilon"])
        upper, lower = band["y"][:3], band["y"][3:][::-1]
        assert band["x"] == [0.5, 2.0, 8.0, 8.0, 2.0, 0.5]
        assert upper == pytest.approx([c["mean"] + (c["std"] or 0) for c in cells])
        assert lower == pytest.approx([c["mean"] - (c["std"] or 0) for c in cells])
        assert band["fill"] == "toself"
        assert band["hoverinfo"] == "skip"
        assert band["showlegend"] is False
        assert band["legendgroup"] == algorithm  # toggles with its line
        r, g, b = (int(algorithm_colour(algorithm)[i : i + 2], 16) for i in (1, 3, 5))
        assert band["fillcolor"].startswith(f"rgba({r}, {g}, {b}, 0.")


def test_tradeoff_reference_is_a_dashed_line_at_its_accuracy(sweep_figure):
    layout = sweep_figure["layout"]
    (line,) = [s for s in layout["shapes"] if s["type"] == "line"]
    assert line["y0"] == line["y1"] == 0.87
    assert (line["x0"], line["x1"], line["xref"]) == (0, 1, "x domain")
    assert line["line"]["dash"] == "dash"
    assert line["line"]["color"] == NEUTRAL_COLOUR
    (rect,) = [s for s in layout["shapes"] if s["type"] == "rect"]
    assert (rect["y0"], rect["y1"]) == pytest.approx((0.865, 0.875))
    assert [a["text"] for a in layout["annotations"]] == ["non-private fedavg: 0.87"]


def test_tradeoff_accepts_a_list_of_references():
    refs = [REFERENCE, {"algorithm": "localnewton", "mean": 0.9, "std": None, "n": 1}]
    fig = to_json(tradeoff(SWEEP, reference=refs))
    assert sorted(s["y0"] for s in fig["layout"]["shapes"] if s["type"] == "line") == [0.87, 0.9]


def test_tradeoff_pareto_trace_passes_through_exactly_the_given_points_in_epsilon_order(sweep_figure):
    (frontier,) = _traces(sweep_figure, "pareto")
    assert frontier["name"] == "Pareto frontier"
    assert frontier["x"] == [0.5, 2.0, 8.0]
    assert frontier["y"] == [0.60, 0.76, 0.84]
    assert frontier["customdata"] == [["isrl_mbsgd", 0.5, []], ["uldp_avg", 2.0, []], ["uldp_avg", 8.0, []]]
    assert frontier["line"]["shape"] == "hv"
    assert frontier["marker"]["symbol"] == "circle-open"


def test_tradeoff_axes_are_log_epsilon_and_accuracy_in_0_1(sweep_figure):
    xaxis, yaxis = sweep_figure["layout"]["xaxis"], sweep_figure["layout"]["yaxis"]
    assert xaxis["type"] == "log"
    assert xaxis["title"]["text"] == "ε (log scale)"
    assert yaxis["range"] == [0, 1]
    assert yaxis["title"]["text"] == "test accuracy"
    assert to_json(tradeoff(SWEEP, log_x=False))["layout"]["xaxis"]["type"] == "linear"


def test_tradeoff_without_points_says_so_instead_of_raising():
    fig = to_json(tradeoff([]))
    assert fig["data"] == []
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["no finished runs yet"]


def test_tradeoff_refuses_a_zero_epsilon_on_a_log_axis():
    with pytest.raises(ValueError, match=r"'isrl_mbsgd' must be a finite number > 0.*log_x=False"):
        tradeoff([{**SWEEP[0], "epsilon": 0.0}])


# --- per-run and per-party figures -----------------------------------------------------------------


def test_accuracy_vs_spent_colours_by_algorithm_and_dashes_by_run():
    rounds = [{"round": r, "accuracy": 0.1 * r, "epsilon": 0.5 * r} for r in (3, 1, 2)]
    runs = [
        {"id": "a", "algorithm": "isrl_mbsgd", "label": "σ 1.0", "rounds": rounds},
        {"id": "b", "algorithm": "isrl_mbsgd", "label": "σ 2.0", "rounds": rounds},
        {"id": "c", "algorithm": "uldp_avg", "label": "ULDP", "rounds": rounds},
    ]
    data = to_json(accuracy_vs_spent(runs))["data"]
    assert data[0]["x"] == [0.5, 1.0, 1.5]
    assert data[0]["y"] == pytest.approx([0.1, 0.2, 0.3])
    assert data[0]["customdata"] == [["a", 1], ["a", 2], ["a", 3]]
    assert [t["line"]["dash"] for t in data] == ["solid", "dash", "solid"]
    assert [t["line"]["color"] for t in data] == [
        algorithm_colour(n) for n in ("isrl_mbsgd",) * 2 + ("uldp_avg",)
    ]


def test_learning_curves_draw_train_loss_only_when_present():
    rounds = [{"round": r, "accuracy": 0.2 * r, "loss": 2.0 / r, "train_loss": 1.5 / r} for r in (1, 2, 3)]
    with_train = to_json(learning_curves(rounds))["data"]
    assert [(t["name"], t["yaxis"]) for t in with_train] == [
        ("test accuracy", "y"),
        ("test loss", "y2"),
        ("train loss (not private)", "y2"),
    ]
    assert with_train[2]["y"] == pytest.approx([1.5, 0.75, 0.5])
    assert len({t["line"]["color"] for t in with_train}) == 3  # accuracy, loss and train loss apart
    without = to_json(learning_curves([{k: v for k, v in r.items() if k != "train_loss"} for r in rounds]))
    assert [t["name"] for t in without["data"]] == ["test accuracy", "test loss"]


def test_a_short_run_is_ticked_at_whole_rounds_and_a_long_one_left_to_plotly():
    # Plotly ticked a 2-round run's axis at 1, 1.2, 1.4, …: rounds that do not exist
    two = [{"round": r, "accuracy": 0.5, "loss": 1.0} for r in (1, 2)]
    layout = to_json(learning_curves(two))["layout"]
    assert (layout["xaxis2"]["title"]["text"], layout["xaxis2"]["dtick"], layout["xaxis"]["dtick"]) == (
        "round",
        1,
        1,
    )
    party = to_json(epsilon_per_party({"silo-0": [0.1, 0.2]}, [1, 2], accountant="rdp", delta=1e-5))["layout"]
    assert party["xaxis"]["dtick"] == 1
    runs = [{"id": "a", "algorithm": "isrl_mbsgd", "seed": 0, "label": "a", "rounds": two}]
    assert to_json(metric_per_round(runs, metric="accuracy"))["layout"]["xaxis"]["dtick"] == 1
    fifty = [{"round": r, "accuracy": 0.5, "loss": 1.0} for r in range(1, 51)]
    assert "dtick" not in to_json(learning_curves(fifty))["layout"]["xaxis2"]


def test_epsilon_per_party_with_100_parties_adds_their_elementwise_max():
    rng = np.random.default_rng(0)
    curves = np.cumsum(rng.uniform(0.0, 0.1, size=(100, 50)), axis=1)
    parties = {f"silo-{i}": curves[i] for i in range(100)}
    fig = to_json(epsilon_per_party(parties, list(range(1, 51)), accountant="rdp", delta=1e-5))
    party_lines = _traces(fig, "party")
    (top,) = _traces(fig, "max")
    assert len(party_lines) == 100
    assert top["y"] == pytest.approx(curves.max(axis=0).tolist())
    assert top["x"] == list(range(1, 51))
    assert sum(t["showlegend"] is not False for t in party_lines) == 1
    assert {t["line"]["width"] for t in party_lines} == {0.8}
    assert fig["layout"]["title"]["text"] == "ε spent per party (rdp, δ = 1e-5)"


def test_epsilon_per_party_with_few_parties_draws_each_in_its_own_colour():
    fig = to_json(
        epsilon_per_party({"silo-0": [0.1, 0.2], "silo-1": [0.2, 0.3]}, [1, 2], accountant="rdp", delta=1e-5)
    )
    assert [t["name"] for t in fig["data"]] == ["silo-0", "silo-1"]
    assert _traces(fig, "max") == []


def test_epsilon_per_party_refuses_values_that_do_not_match_the_rounds():
    with pytest.raises(ValueError, match=r"'silo-1' has 1 ε values; expected one per round \(2\)"):
        epsilon_per_party({"silo-0": [0.1, 0.2], "silo-1": [0.1]}, [1, 2], accountant="rdp", delta=1e-5)


def test_label_histogram_bars_sum_to_the_histogram_totals():
    histogram = np.random.default_rng(1).integers(0, 500, size=(8, 10))
    fig = to_json(label_histogram(histogram, class_names=[str(c) for c in range(10)]))
    bars = fig["data"]
    assert fig["layout"]["barmode"] == "stack"
    assert [b["name"] for b in bars] == [str(c) for c in range(10)]
    assert bars[0]["x"] == [f"silo-{i}" for i in range(8)]
    assert np.sum([b["y"] for b in bars], axis=0).tolist() == histogram.sum(axis=1).tolist()
    assert sum(sum(b["y"]) for b in bars) == int(histogram.sum())


# --- JSON -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: tradeoff(SWEEP, reference=REFERENCE, pareto=PARETO),
        lambda: tradeoff([]),
        lambda: accuracy_vs_spent([]),
        lambda: learning_curves([]),
        lambda: epsilon_per_party({"silo-0": [0.1, float("inf")]}, [1, 2], accountant="rdp", delta=1e-5),
        lambda: label_histogram([[1, 2], [3, 4]]),
    ],
)
def test_figure_json_round_trips_through_strict_json(build):
    fig = to_json(build())
    assert json.loads(json.dumps(fig, allow_nan=False)) == fig
    assert fig["layout"]["template"]["layout"]["plot_bgcolor"] == "white"  # plotly_white, embedded


def test_user_distribution_counts_every_user_once():
    summary = {"kind": "zipf", "records_per_user": [1, 1, 2, 5, 40, 3], "silos_per_user": [0, 3, 2, 1]}
    fig = to_json(user_distribution(summary))
    records, silos = fig["data"]
    assert fig["layout"]["meta"]["figure"] == "user_distribution"
    assert sum(records["y"]) == 6 and records["x"][0] == "1–2" and records["y"][0] == 3
    assert silos["x"] == ["1", "2", "3"] and silos["y"] == [3, 2, 1]
    small = to_json(user_distribution({"records_per_user": [2, 3, 3], "silos_per_user": [0, 3]}))
    assert small["data"][0]["x"] == ["2", "3"] and small["data"][0]["y"] == [1, 2]


def test_a_log_epsilon_axis_is_labelled_with_numbers_not_bare_digits():
    # Plotly's own labels on a log axis over about a decade are digits: ε = 0.5 shows as "5".
    xaxis = to_json(tradeoff(SWEEP))["layout"]["xaxis"]
    assert xaxis["tickvals"] == [0.5, 2.0, 8.0]
    assert xaxis["ticktext"] == ["0.5", "2", "8"]
    many = [{**SWEEP[0], "epsilon": 0.3 * 1.25**i} for i in range(12)]  # 0.3 … 3.49
    xaxis = to_json(tradeoff(many))["layout"]["xaxis"]
    assert xaxis["ticktext"] == ["0.2", "0.5", "1", "2", "5"]
    runs = [
        {
            "id": "r",
            "algorithm": "isrl_mbsgd",
            "label": "r",
            "rounds": [{"round": i, "accuracy": 0.5, "epsilon": 0.04 * i} for i in range(1, 40)],
        }
    ]
    xaxis = to_json(accuracy_vs_spent(runs, log_x=True))["layout"]["xaxis"]
    assert xaxis["ticktext"] == ["0.05", "0.1", "0.2", "0.5", "1", "2"]
    assert "tickvals" not in to_json(accuracy_vs_spent(runs))["layout"]["xaxis"]


def test_the_partition_and_user_figures_say_they_are_not_private():
    # issue 39, measurement 9: diagnostics are labelled wherever they are served, figures included
    label = "not private: computed from the private data without noise, not covered by the ledger's ε"
    partition = to_json(label_histogram([[3, 1], [0, 4]]))
    users = to_json(user_distribution({"records_per_user": [2, 3, 3], "silos_per_user": [0, 3]}))
    for fig in (partition, users):
        assert fig["layout"]["title"]["subtitle"]["text"] == label

"""The compare figures over the API: sweeps and picked runs on one chart, notion panels, the subtitle,
the majority-class baseline, the drill-down curves, and a sweep's parcoords and importance.

One SQLite app for the module: two small sweeps and a user-level run on digits, run in-process.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from tests.backend.conftest import make_settings, run_here
from tests.factories import data_dir

pytestmark = pytest.mark.service

BASE = {
    "params": {"lr": 0.5, "batch_size": 64},
    "params_by_algorithm": {"isrl_mbsgd": {"clip": 1.0}},
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 3,
    "privacy": {"delta": 1e-5},
}
USER_RUN = {
    "algorithm": "uldp_avg",
    "params": {},
    "dataset": {"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 20}},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 3,
    "privacy": {"epsilon": 2.0, "delta": 1e-5},
}
DIGITS_MAJORITY = 37 / 359  # digits' evaluation set: 37 of its 359 records are its commonest class
MIXED_WARNING = (
    "These runs use 2 privacy notions (record-level DP, user-level DP). Their ε are different units, "
    "so each notion has its own panel: do not compare ε across panels."
)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Sweep "eps" (isrl_mbsgd at ε 1 and 8, fedavg; seeds 0, 1), sweep "lr" (isrl_mbsgd at ε 8, lr
    0.05 and 0.5; seeds 0, 1) and one uldp_avg run, all succeeded."""
    data_dir()
    home = tmp_path_factory.mktemp("compare")
    url = f"sqlite:///{home / 'dpfl.db'}"
    migrate.upgrade(url)
    settings = make_settings(home, url)
    with TestClient(create_app(settings)) as client:
        eps = client.post(
            "/api/sweeps",
            json={
                "name": "eps",
                "base": BASE,
                "grid": {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [1, 8], "seed": [0, 1]},
            },
        ).json()
        lr = client.post(
            "/api/sweeps",
            json={
                "name": "lr",
                "base": BASE | {"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 8, "delta": 1e-5}},
                "grid": {"params.lr": [0.05, 0.5], "seed": [0, 1]},
            },
        ).json()
        user = client.post("/api/runs", json=USER_RUN).json()["id"]
        for run_id in [*eps["run_ids"], *lr["run_ids"], user]:
            run_here(settings, run_id)
        runs = {r["id"]: r for r in client.get("/api/runs", params={"limit": 100}).json()["items"]}
        assert {r["status"] for r in runs.values()} == {"succeeded"}
        yield {
            "client": client,
            "settings": settings,
            "eps": eps["id"],
            "lr": lr["id"],
            "user": user,
            "runs": runs,
        }


def _traces(fig: dict, role: str) -> list[dict]:
    return [t for t in fig["data"] if t["meta"]["role"] == role]


def _ids(world, *, sweep: str, algorithm: str, epsilon: float | None = None) -> list[str]:
    runs = world["client"].get(f"/api/sweeps/{world[sweep]}").json()["runs"]
    return sorted(
        r["id"]
        for r in runs
        if r["algorithm"] == algorithm and (epsilon is None or r["target_epsilon"] == epsilon)
    )


def test_two_sweeps_and_a_picked_run_on_one_chart_in_one_panel_per_notion(world):
    client = world["client"]
    res = client.get(
        "/api/figures/tradeoff", params={"sweeps": f"{world['eps']},{world['lr']}", "runs": world["user"]}
    )
    assert res.status_code == 200
    fig = res.json()
    layout = fig["layout"]
    assert layout["meta"]["notions"] == ["record", "user"]
    assert layout["meta"]["warning"] == MIXED_WARNING
    assert layout["meta"]["left_out"] == []
    assert layout["xaxis"]["title"]["text"] == "ε (record-level DP), δ = 1e-5"
    assert layout["xaxis2"]["title"]["text"] == "ε (user-level DP), δ = 1e-5"
    assert layout["title"]["subtitle"]["text"] == "digits · δ = 1e-5 · 3 rounds · rdp"
    means = _traces(fig, "mean")
    # isrl_mbsgd comes from both sweeps: one series each, never averaged together; the lr sweep's
    # two learning rates are two configurations, each a series named by its lr (issue 40)
    assert [(t["name"], t["xaxis"], t["x"]) for t in means] == [
        ("isrl_mbsgd · sweep eps · lr = 0.5", "x", pytest.approx([1.0, 8.0], rel=1e-5)),
        ("isrl_mbsgd · sweep lr · lr = 0.05", "x", pytest.approx([8.0], rel=1e-5)),
        ("isrl_mbsgd · sweep lr · lr = 0.5", "x", pytest.approx([8.0], rel=1e-5)),
        ("uldp_avg", "x2", pytest.approx([2.0], rel=1e-5)),
    ]  # at the ε spent, which the calibration puts a hair under each target
    assert means[1]["mode"] == "lines+markers"  # a single point still shows
    assert means[0]["customdata"][0] == [
        "isrl_mbsgd",
        pytest.approx(1.0, rel=1e-5),
        _ids(world, sweep="eps", algorithm="isrl_mbsgd", epsilon=1),
    ]
    assert len(means[1]["customdata"][0][2]) == 2  # lr 0.05 at seeds 0 and 1: one point of n = 2
    assert len(means[2]["customdata"][0][2]) == 2
    assert means[3]["customdata"] == [["uldp_avg", pytest.approx(2.0, rel=1e-5), [world["user"]]]]
    runs = world["runs"]
    cell = [runs[i]["final_accuracy"] for i in means[0]["customdata"][0][2]]
    assert means[0]["y"][0] == pytest.approx(sum(cell) / 2, abs=1e-12)
    lines = [s for s in layout["shapes"] if s["type"] == "line"]
    assert [(s["line"]["dash"], s["xref"]) for s in lines] == [
        ("dash", "x domain"),
        ("dash", "x2 domain"),
        ("dot", "x domain"),
        ("dot", "x2 domain"),
    ]
    assert lines[2]["y0"] == pytest.approx(DIGITS_MAJORITY, abs=1e-12)
    texts = [a["text"] for a in layout["annotations"]]
    assert texts[1] == "majority class: 0.103 (not private)"
    assert texts[0].startswith("non-private fedavg: ")
    assert [t["xaxis"] for t in _traces(fig, "pareto")] == ["x", "x2"]


def test_a_point_no_better_than_guessing_is_marked_and_the_run_read_says_so(world):
    client = world["client"]
    run = client.get(f"/api/runs/{world['user']}").json()
    assert run["baseline_accuracy"] == pytest.approx(DIGITS_MAJORITY, abs=1e-12)
    margin = max(0.005, 2 * math.sqrt(DIGITS_MAJORITY * (1 - DIGITS_MAJORITY) / 359))
    guessing = run["final_accuracy"] <= DIGITS_MAJORITY + margin
    assert run["no_better_than_guessing"] is guessing
    (mean,) = _traces(client.get("/api/figures/tradeoff", params={"runs": world["user"]}).json(), "mean")
    assert mean["marker"]["symbol"] == ["x" if guessing else "circle"]
    assert ("no better than guessing" in mean["hovertext"][0]) is guessing
    fedavg = _ids(world, sweep="eps", algorithm="fedavg")[0]
    read = client.get(f"/api/runs/{fedavg}").json()
    assert (read["baseline_accuracy"], read["no_better_than_guessing"]) == (
        pytest.approx(DIGITS_MAJORITY),
        None,
    )


def test_the_old_single_sweep_link_still_draws_with_its_notion_named(world):
    fig = world["client"].get("/api/figures/tradeoff", params={"sweep": world["eps"], "log": 0}).json()
    assert fig["layout"]["xaxis"]["title"]["text"] == "ε (record-level DP), δ = 1e-5"
    assert fig["layout"]["xaxis"]["type"] == "linear"
    assert fig["layout"]["meta"]["notions"] == ["record"] and fig["layout"]["meta"]["warning"] is None
    assert [t["name"] for t in _traces(fig, "mean")] == ["isrl_mbsgd"]  # one source: no suffix


def test_compare_refuses_unknown_ids_and_draws_nothing_for_no_ids(world):
    client = world["client"]
    res = client.get("/api/figures/tradeoff", params={"sweeps": "nope"})
    assert (res.status_code, res.json()["detail"]) == (404, "sweep 'nope' does not exist")
    res = client.get("/api/figures/tradeoff", params={"runs": f"{world['user']},gone"})
    assert (res.status_code, res.json()["detail"]) == (404, "run 'gone' does not exist")
    # no ids is an empty view, as a sweep without results is (and nothing to average)
    res = client.get("/api/figures/tradeoff", params={"average": "params.lr"})
    assert res.status_code == 200 and res.json()["data"] == []
    assert client.get("/api/figures/tradeoff/points", params={"sweeps": ","}).json() == []
    res = client.get("/api/figures/curves", params={"runs": ","})
    assert res.status_code == 200 and res.json()["data"] == []
    res = client.get("/api/figures/curves", params={"runs": "gone"})
    assert (res.status_code, res.json()["detail"]) == (404, "run 'gone' does not exist")
    res = client.get("/api/sweeps/nope/figures/parcoords")
    assert (res.status_code, res.json()["detail"]) == (404, "sweep 'nope' does not exist")


def test_spent_figure_puts_each_notion_in_its_own_panel(world):
    isrl = _ids(world, sweep="eps", algorithm="isrl_mbsgd", epsilon=8)[0]
    fig = world["client"].get("/api/figures/spent", params={"runs": f"{isrl},{world['user']}"}).json()
    assert [(t["meta"]["run_id"], t["xaxis"]) for t in fig["data"]] == [(isrl, "x"), (world["user"], "x2")]
    assert fig["layout"]["xaxis2"]["title"]["text"] == "ε (user-level DP), δ = 1e-5"
    assert fig["layout"]["meta"]["warning"] == MIXED_WARNING
    assert fig["layout"]["title"]["subtitle"]["text"] == "digits · δ = 1e-5 · 3 rounds · rdp"


def test_curves_of_a_points_seeds_draw_one_line_per_run(world):
    client = world["client"]
    seeds = _ids(world, sweep="eps", algorithm="isrl_mbsgd", epsilon=1)
    fig = client.get("/api/figures/curves", params={"runs": ",".join([*seeds, world["user"]])}).json()
    assert fig["layout"]["meta"]["figure"] == "accuracy_per_round"
    assert [t["meta"]["run_id"] for t in fig["data"]] == [*seeds, world["user"]]
    seed = {i: client.get(f"/api/runs/{i}/spec").json()["seed"] for i in [*seeds, world["user"]]}
    assert sorted(seed[i] for i in seeds) == [0, 1] and seed[world["user"]] == 0
    assert [t["line"]["dash"] for t in fig["data"]] == [["solid", "dash"][seed[i]] for i in seed]
    metrics = client.get(f"/api/runs/{seeds[0]}/metrics").json()
    assert fig["data"][0]["x"] == [m["round"] for m in metrics] == [1, 2, 3]
    assert fig["data"][0]["y"] == [m["accuracy"] for m in metrics]
    assert fig["data"][0]["customdata"] == [[seeds[0], r] for r in (1, 2, 3)]


def test_an_overlay_of_picked_runs_draws_loss_train_loss_or_epsilon_with_log_y_and_smoothing(world):
    client = world["client"]
    ids = _ids(world, sweep="eps", algorithm="isrl_mbsgd", epsilon=1)
    metrics = client.get(f"/api/runs/{ids[0]}/metrics").json()
    for metric, key in (("loss", "loss"), ("epsilon", "epsilon"), ("balanced_accuracy", "balanced_accuracy")):
        fig = client.get("/api/figures/curves", params={"runs": ",".join(ids), "metric": metric}).json()
        assert fig["layout"]["meta"]["figure"] == f"{metric}_per_round"
        assert fig["data"][0]["y"] == [m[key] for m in metrics]
    train = client.get("/api/figures/curves", params={"runs": ids[0], "metric": "train_loss"}).json()
    assert train["data"][0]["y"] == [m["diagnostics"]["train_loss"] for m in metrics]
    fig = client.get(
        "/api/figures/curves", params={"runs": ids[0], "metric": "loss", "log_y": 1, "smoothing": 0.6}
    ).json()
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert [t["meta"]["role"] for t in fig["data"]] == ["raw", "run"]
    assert fig["data"][1]["y"][0] == pytest.approx(metrics[0]["loss"])  # debiased: starts at the first value
    res = client.get("/api/figures/curves", params={"runs": ids[0], "smoothing": 1})
    assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["query", "smoothing"]
    res = client.get("/api/figures/curves", params={"runs": ids[0], "metric": "f1"})
    assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["query", "metric"]


def test_parcoords_of_a_sweep_has_its_varying_parameters_then_outcomes(world):
    client = world["client"]
    fig = client.get(f"/api/sweeps/{world['eps']}/figures/parcoords").json()
    (trace,) = fig["data"]
    assert trace["type"] == "parcoords"
    assert [d["label"] for d in trace["dimensions"]] == ["σ", "ε target", "seed", "ε spent", "final accuracy"]
    assert sorted(fig["layout"]["meta"]["left_out"]) == _ids(world, sweep="eps", algorithm="fedavg")
    run_ids = fig["layout"]["meta"]["run_ids"]
    assert sorted(run_ids) == _ids(world, sweep="eps", algorithm="isrl_mbsgd")
    runs = world["runs"]
    assert trace["dimensions"][1]["values"] == [runs[i]["target_epsilon"] for i in run_ids]
    assert trace["dimensions"][4]["values"] == [runs[i]["final_accuracy"] for i in run_ids]
    assert trace["line"]["color"] == trace["dimensions"][4]["values"]
    assert fig["layout"]["title"]["subtitle"]["text"] == "4 runs of sweep eps · 2 non-private runs not drawn"


def test_importance_of_a_sweep_is_the_bias_corrected_between_group_variance_share(world):
    client = world["client"]
    fig = client.get(f"/api/sweeps/{world['lr']}/figures/importance").json()
    shares = {e["parameter"]: e for e in fig["layout"]["meta"]["importance"]}
    assert sorted(shares) == ["params.lr"]  # the seed is the sweep's repetition, not a hyperparameter
    accuracy = {
        run_id: world["runs"][run_id]["final_accuracy"]
        for run_id in _ids(world, sweep="lr", algorithm="isrl_mbsgd")
    }
    mean = sum(accuracy.values()) / 4
    total = sum((a - mean) ** 2 for a in accuracy.values())
    groups: dict[Any, list[float]] = {}
    for run_id, a in accuracy.items():
        groups.setdefault(client.get(f"/api/runs/{run_id}/spec").json()["params"]["lr"], []).append(a)
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
    within = (total - between) / (4 - 2)
    assert shares["params.lr"]["share"] == pytest.approx(
        max(0.0, (between - within) / (total + within)), rel=1e-9
    )
    assert (shares["params.lr"]["levels"], shares["params.lr"]["left_out"]) == (2, None)
    (bars,) = fig["data"]
    assert bars["y"] == ["params.lr"] and bars["x"] == [shares["params.lr"]["share"]]
    assert fig["layout"]["xaxis"]["title"]["text"].startswith("ω²")


def test_a_protected_dataset_shows_no_majority_class(world):
    client, settings = world["client"], world["settings"]
    public = {"total_epsilon": 100.0, "public_test": True}  # its accuracy is served, its baseline not
    assert client.put("/api/budgets/digits", json=public).status_code == 200
    try:
        spec = {k: v for k, v in BASE.items() if k != "params_by_algorithm"}
        spec |= {"algorithm": "isrl_mbsgd", "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0}}
        run_id = client.post("/api/runs", json=spec | {"privacy": {"epsilon": 1, "delta": 1e-5}}).json()["id"]
        run_here(settings, run_id)
        run = client.get(f"/api/runs/{run_id}").json()
        assert (run["protected"], run["baseline_accuracy"], run["no_better_than_guessing"]) == (
            True,
            None,
            None,
        )
        fig = client.get("/api/figures/tradeoff", params={"runs": f"{run_id},{world['user']}"}).json()
        assert [s for s in fig["layout"].get("shapes", []) if s["line"]["dash"] == "dot"] == []
        (mine,) = [t for t in _traces(fig, "mean") if t["name"] == "isrl_mbsgd · protected"]
        assert set(mine["marker"]["symbol"]) == {"diamond"}  # never × ("no better than guessing")
    finally:
        client.delete("/api/budgets/digits")


def test_reference_lines_appear_only_in_the_panels_of_their_datasets_runs(world):
    client = world["client"]
    gdp = client.post(
        "/api/runs",
        json={
            "algorithm": "gdp_gd",
            "params": {"feature_clip": 3.0, "lr": 0.5},
            "dataset": {"name": "logistic", "silos": 2, "options": {"num_samples": 200, "num_test": 100}},
            "model": {"name": "logreg"},
            "rounds": 2,
            "privacy": {"epsilon": 2.0, "delta": 1e-5, "accountant": "gdp"},
        },
    ).json()["id"]
    run_here(world["settings"], gdp)
    fig = client.get("/api/figures/tradeoff", params={"sweeps": world["eps"], "runs": gdp}).json()
    panel = {
        notion: "x domain" if i == 0 else f"x{i + 1} domain"
        for i, notion in enumerate(fig["layout"]["meta"]["notions"])
    }
    assert sorted(panel) == ["gdp", "record"]
    # digits' FedAvg and majority class belong with digits' record-level runs, logistic's with GDP
    lines = sorted((s["xref"], s["line"]["dash"]) for s in fig["layout"]["shapes"] if s["type"] == "line")
    assert lines == sorted([(panel["record"], "dash"), (panel["record"], "dot"), (panel["gdp"], "dot")])
    labels = sorted(a["text"].split(":")[0] for a in fig["layout"]["annotations"] if "class" in a["text"])
    assert labels == ["majority class, digits", "majority class, logistic"]
    assert {t["meta"]["notion"] for t in _traces(fig, "pareto")} == {"record", "gdp"}

    # a record-level run on logistic too: that panel's frontier would rank two tasks, so it has none
    isrl = client.post(
        "/api/runs",
        json={
            "algorithm": "isrl_mbsgd",
            "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
            "dataset": {"name": "logistic", "silos": 2, "options": {"num_samples": 200, "num_test": 100}},
            "model": {"name": "logreg"},
            "rounds": 2,
            "privacy": {"epsilon": 4.0, "delta": 1e-5},
        },
    ).json()["id"]
    run_here(world["settings"], isrl)
    fig = client.get("/api/figures/tradeoff", params={"sweeps": world["eps"], "runs": f"{gdp},{isrl}"}).json()
    assert {t["meta"]["notion"] for t in _traces(fig, "pareto")} == {"gdp"}
    (note,) = [a for a in fig["layout"]["annotations"] if a.get("name") == "no-frontier"]
    assert note["text"] == "no Pareto frontier: runs on 2 datasets (digits, logistic) are not ranked together"
    assert note["xref"] == panel["record"]


def test_the_band_is_chosen_and_each_run_can_be_drawn(world):
    client = world["client"]
    fig = client.get(
        "/api/figures/tradeoff", params={"sweep": world["eps"], "band": "minmax", "individual": 1}
    ).json()
    bands = _traces(fig, "band")
    assert bands and {b["meta"]["band"] for b in bands} == {"minmax"}
    runs = _traces(fig, "run")
    drawn = {c[2][0]: y for t in runs for c, y in zip(t["customdata"], t["y"], strict=True)}
    isrl = _ids(world, sweep="eps", algorithm="isrl_mbsgd")
    assert sorted(drawn) == isrl  # every private run once; the non-private ones are the reference
    assert all(drawn[i] == pytest.approx(world["runs"][i]["final_accuracy"]) for i in isrl)
    (band,) = [b for b in bands if b["meta"]["algorithm"] == "isrl_mbsgd"]
    low = min(drawn[i] for i in _ids(world, sweep="eps", algorithm="isrl_mbsgd", epsilon=1))
    assert band["y"][-1] == pytest.approx(low)  # the lower edge at ε 1 is the worse seed
    bad = client.get("/api/figures/tradeoff", params={"sweep": world["eps"], "band": "iqr"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "band"]


def test_a_field_is_averaged_over_only_when_the_user_asks(world):
    client = world["client"]
    fig = client.get("/api/figures/tradeoff", params={"sweep": world["lr"]}).json()
    assert fig["layout"]["meta"]["varying"] == ["params.lr"] and fig["layout"]["meta"]["averaged"] == []
    assert sorted((t["name"], len(t["customdata"][0][2])) for t in _mean(fig)) == [
        ("isrl_mbsgd · lr = 0.05", 2),
        ("isrl_mbsgd · lr = 0.5", 2),
    ]
    merged = client.get("/api/figures/tradeoff", params={"sweep": world["lr"], "average": "params.lr"}).json()
    (mean,) = _mean(merged)
    assert mean["name"] == "isrl_mbsgd · averaged over lr" and len(mean["customdata"][0][2]) == 4
    assert merged["layout"]["meta"]["averaged"] == ["params.lr"]
    bad = client.get("/api/figures/tradeoff", params={"sweep": world["lr"], "average": "params.clip"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["query", "average"]
    assert bad.json()["detail"][0]["msg"].startswith(
        "must name fields that vary between these runs (params.lr)"
    )


def _mean(fig: dict) -> list[dict]:
    return _traces(fig, "mean")


def test_any_view_exports_its_points_as_json_and_csv(world):
    """Two sweeps and a picked run: one row per point the chart draws, at the ε spent, with its
    band, its runs and whether it is on the frontier; the CSV has the same cells."""
    client = world["client"]
    query = {"sweeps": f"{world['eps']},{world['lr']}", "runs": world["user"], "band": "minmax"}
    fig = client.get("/api/figures/tradeoff", params=query).json()
    rows = client.get("/api/figures/tradeoff/points", params=query).json()
    drawn = sorted((t["name"], x) for t in _traces(fig, "mean") for x in t["x"])
    private = [r for r in rows if r["notion"] != "none"]
    assert sorted((r["series"], r["epsilon"]) for r in private) == drawn
    assert len(private) == 2 + 2 + 1  # isrl_mbsgd at ε 1 and 8 (eps), lr 0.05 and 0.5 (lr), uldp_avg
    assert [r["series"] for r in rows if r["notion"] == "none"] == ["fedavg"]
    for row in private:
        runs = [world["runs"][i] for i in row["run_ids"].split()]
        assert row["n"] == len(runs) == len({r["seed"] for r in runs})  # one configuration: seeds only
        assert row["epsilon"] == pytest.approx(sum(r["epsilon"] for r in runs) / len(runs))
        accuracies = [r["final_accuracy"] for r in runs]
        assert (row["band_low"], row["band_high"]) == (min(accuracies), max(accuracies))
        assert row["guaranteed"] is True and row["protected"] is False
    frontier = {(t["meta"]["notion"], x) for t in _traces(fig, "pareto") for x in t["x"]}
    assert {(r["notion"], r["epsilon"]) for r in private if r["pareto"]} == frontier

    text = client.get("/api/figures/tradeoff/points.csv", params=query)
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(text.text)))
    assert [r["series"] for r in table] == [r["series"] for r in rows]
    assert {r["delta"] for r in table} == {"1e-5", ""}  # as every page writes δ; none for fedavg
    assert [float(r["epsilon"]) for r in table[: len(private)]] == [r["epsilon"] for r in private]

    bad = client.get("/api/figures/tradeoff/points", params={"runs": world["user"], "average": "seed"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "average"]


def test_each_round_serves_balanced_accuracy_and_the_run_page_draws_it_beside_accuracy(world):
    client = world["client"]
    run_id = _ids(world, sweep="eps", algorithm="fedavg")[0]
    metrics = client.get(f"/api/runs/{run_id}/metrics").json()
    assert all(0 <= m["balanced_accuracy"] <= 1 for m in metrics)
    learning = client.get(f"/api/runs/{run_id}/figures").json()["learning"]
    shown = {t["meta"]["role"]: t for t in learning["data"]}
    assert list(shown) == ["accuracy", "balanced_accuracy", "loss", "train_loss"]
    assert shown["balanced_accuracy"]["y"] == [m["balanced_accuracy"] for m in metrics]
    assert shown["balanced_accuracy"]["name"] == "test balanced accuracy"
    fig = client.get("/api/figures/curves", params={"runs": run_id, "metric": "balanced_accuracy"}).json()
    assert fig["layout"]["yaxis"]["range"] == [0, 1]
    assert fig["layout"]["yaxis"]["title"]["text"] == "test balanced accuracy"

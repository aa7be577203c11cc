"""Every point on the trade-off chart says what its ε is worth (issue 40, part 2): it sits at the ε
its ledger spent, not its target, and a point whose ledger does not cover every release is hollow,
says why, and is never on the Pareto frontier."""

from __future__ import annotations

import pytest

from tests.backend.conftest import run_here
from tests.factories import service_spec

pytestmark = pytest.mark.service

USERS = {"name": "digits", "silos": 2, "users": {"kind": "uniform", "count": 20}}


def _mean(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t["meta"]["role"] == "mean"]


def test_a_paper_calibrated_point_sits_at_the_epsilon_it_spent(client, settings):
    paper = service_spec(
        algorithm="uldp_naive",
        params={},
        dataset=USERS,
        rounds=2,
        privacy={"epsilon": 1.0, "delta": 1e-5, "calibration": "paper"},
    )
    run_id = client.post("/api/runs", json=paper).json()["id"]
    run_here(settings, run_id)
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "succeeded" and run["epsilon"] > 1.5  # the paper's σ under-protects
    fig = client.get("/api/figures/tradeoff", params={"runs": run_id}).json()
    (mean,) = _mean(fig)
    assert mean["x"] == [pytest.approx(run["epsilon"], rel=1e-12)]
    assert f"ε = {run['epsilon']:.3g} spent (target 1: missed)" in mean["hovertext"][0]
    # and without a hover: a dotted line from the target (a tick) to the ε spent
    (missed,) = [t for t in fig["data"] if t["meta"]["role"] == "missed"]
    assert missed["x"] == [1.0, pytest.approx(run["epsilon"], rel=1e-12), None]
    assert missed["y"] == [mean["y"][0], mean["y"][0], None] and missed["marker"]["size"] == [14, 0, 0]
    assert missed["name"] == "ε target, missed" and missed["showlegend"] is True


def test_a_run_its_ledger_does_not_cover_is_hollow_named_and_off_the_frontier(client, settings):
    plain = service_spec(dataset={"name": "digits", "silos": 4}, privacy={"epsilon": 4.0, "delta": 1e-5})
    fitted = service_spec(
        dataset={"name": "digits", "silos": 4, "features": {"pca": 10}},
        privacy={"epsilon": 2.0, "delta": 1e-5},
    )
    ids = [client.post("/api/runs", json=spec).json()["id"] for spec in (plain, fitted)]
    for run_id in ids:
        run_here(settings, run_id)
    fig = client.get("/api/figures/tradeoff", params={"runs": ",".join(ids)}).json()
    by_name = {t["name"]: t for t in _mean(fig)}
    uncovered = by_name["isrl_mbsgd · pca = 10 (not guaranteed)"]
    assert uncovered["marker"]["symbol"][0].endswith("-open")  # a circle, or × if no better than guessing
    assert uncovered["line"]["dash"] == "dot"  # hollow and dotted; no guaranteed series is dotted
    assert "not guaranteed: PCA to 10 components fitted on the training rows" in uncovered["hovertext"][0]
    covered = by_name["isrl_mbsgd · pca = none"]
    assert not covered["marker"]["symbol"][0].endswith("-open") and covered["line"]["dash"] != "dot"
    (frontier,) = [t for t in fig["data"] if t["meta"]["role"] == "pareto"]
    assert frontier["x"] == covered["x"]  # the fitted run has the lower ε, yet is not on it
    assert fig["layout"]["meta"]["not_guaranteed"] == []

    # the toggle: runs whose guarantee is broken are left out, and named
    shown = client.get("/api/figures/tradeoff", params={"runs": ",".join(ids), "guaranteed": 1}).json()
    assert [t["name"] for t in _mean(shown)] == ["isrl_mbsgd"]  # one configuration left: no label
    assert shown["layout"]["meta"]["not_guaranteed"] == [ids[1]]
    assert shown["layout"]["meta"]["left_out"] == []
    bad = client.get("/api/figures/tradeoff", params={"runs": ids[0], "guaranteed": 2})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "guaranteed"]


def test_a_panel_of_runs_none_guaranteed_says_why_it_has_no_frontier(client, settings):
    fitted = service_spec(
        dataset={"name": "digits", "silos": 4, "features": {"pca": 10}},
        privacy={"epsilon": 2.0, "delta": 1e-5},
    )
    run_id = client.post("/api/runs", json=fitted).json()["id"]
    run_here(settings, run_id)
    fig = client.get("/api/figures/tradeoff", params={"runs": run_id}).json()
    assert [t for t in fig["data"] if t["meta"]["role"] == "pareto"] == []
    (note,) = [a for a in fig["layout"]["annotations"] if a.get("name") == "no-frontier"]
    why = "no run here is guaranteed (its ledger does not cover every release)"
    assert note["text"] == f"no Pareto frontier: {why}"


def test_a_protected_run_is_a_series_of_its_own_drawn_as_diamonds(client, settings):
    spec = service_spec(dataset={"name": "digits", "silos": 4}, privacy={"epsilon": 4.0, "delta": 1e-5})
    simulation = client.post("/api/runs", json=spec).json()["id"]
    run_here(settings, simulation)  # finished before the budget: a simulation
    # the test split declared public, so the protected run's accuracy may be shown
    budget = client.put("/api/budgets/digits", json={"total_epsilon": 50.0, "public_test": True})
    assert budget.status_code == 200
    protected = client.post("/api/runs", json=spec).json()["id"]
    run_here(settings, protected)
    flags = [client.get(f"/api/runs/{i}").json()["protected"] for i in (simulation, protected)]
    assert flags == [False, True]
    fig = client.get("/api/figures/tradeoff", params={"runs": f"{simulation},{protected}"}).json()
    by_name = {t["name"]: t for t in _mean(fig)}
    assert sorted(by_name) == ["isrl_mbsgd", "isrl_mbsgd · protected"]  # never averaged together
    assert by_name["isrl_mbsgd · protected"]["marker"]["symbol"] == ["diamond"]
    assert "protected: charged to its data's budget" in by_name["isrl_mbsgd · protected"]["hovertext"][0]
    assert by_name["isrl_mbsgd"]["marker"]["symbol"] in (["circle"], ["x"])  # × if no better than guessing
    assert "simulation: its noise can be replayed from the spec" in by_name["isrl_mbsgd"]["hovertext"][0]

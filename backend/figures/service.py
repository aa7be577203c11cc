"""Turns stored results into dpfl.plots figures (JSON); the browser only draws them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.errors import NotFound
from backend.models import RoundMetric, Run
from backend.runs import service as runs
from backend.sweeps import service as sweeps
from dpfl import plots

__all__ = ["run_figures", "spent_figure", "tradeoff_figure"]


def tradeoff_figure(session: Session, sweep_id: str, *, log_x: bool) -> dict[str, Any]:
    """Returns the sweep's accuracy-against-ε figure: lines, ±1 std bands, Pareto frontier, reference."""
    summary = sweeps.summary(session, sweep_id)
    points = [
        {
            "algorithm": r["algorithm"],
            "n": r["n"],
            "mean": r["accuracy_mean"],
            "std": r["accuracy_std"],
            "epsilon": r["target_epsilon"] if r["target_epsilon"] is not None else r["epsilon_mean"],
        }
        for r in summary["rows"]
        if r["notion"] != "none" and r["accuracy_mean"] is not None
    ]
    reference = [
        {"algorithm": r["algorithm"], "mean": r["accuracy_mean"], "std": r["accuracy_std"], "n": r["n"]}
        for r in summary["reference"]
        if r["accuracy_mean"] is not None
    ]
    pareto = [
        {"algorithm": p["algorithm"], "epsilon": p["epsilon"], "mean": p["accuracy"]}
        for p in summary["pareto"]
    ]
    return plots.to_json(
        plots.tradeoff(points, reference=reference or None, pareto=pareto or None, log_x=log_x)
    )


def spent_figure(session: Session, run_ids: list[str]) -> dict[str, Any]:
    """Returns accuracy against ε spent so far, per round, one line per run."""
    series = []
    for run_id in run_ids:
        run = session.get(Run, run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} does not exist")
        rows = session.scalars(
            select(RoundMetric).where(RoundMetric.run_id == run_id).order_by(RoundMetric.round)
        )
        series.append(
            {
                "id": run.id,
                "algorithm": run.algorithm,
                "label": f"{run.algorithm} ε={run.target_epsilon or '–'} ({run.id[:6]})",
                "rounds": [{"round": m.round, "accuracy": m.accuracy, "epsilon": m.epsilon} for m in rows],
            }
        )
    return plots.to_json(plots.accuracy_vs_spent(series))


def run_figures(session: Session, run_id: str, *, accountant: str | None) -> dict[str, Any]:
    """Returns one run's figures: learning curves, ε per round per party, partition histogram."""
    run = runs.get_run(session, run_id)
    metrics = runs.metrics(session, run_id)
    out: dict[str, Any] = {
        "learning": plots.to_json(
            plots.learning_curves(
                [
                    {
                        "round": m.round,
                        "accuracy": m.accuracy,
                        "loss": m.loss,
                        "train_loss": (m.diagnostics or {}).get("train_loss"),
                    }
                    for m in metrics
                ]
            )
        )
    }
    if run.notion != "none":
        ledger = runs.ledger(session, run_id, accountant=accountant, delta=None)
        if ledger["rounds"]:
            parties = {p: [0.0 if x is None else x for x in c] for p, c in ledger["parties"].items()}
            # the title names the accountant; an ε that is not a sound bound is labelled there too
            label = ", ".join(
                [ledger["accountant"]]
                + (["approximate"] if ledger["approximate"] else [])
                + (["data-dependent"] if ledger["data_dependent"] else [])
            )
            out["epsilon"] = plots.to_json(
                plots.epsilon_per_party(parties, ledger["rounds"], accountant=label, delta=ledger["delta"])
            )
    diagnostics = run.diagnostics or {}  # not private; empty when withheld (protected runs)
    if diagnostics.get("label_histogram"):
        out["partition"] = plots.to_json(plots.label_histogram(diagnostics["label_histogram"]))
    if diagnostics.get("users"):
        out["users"] = plots.to_json(plots.user_distribution(diagnostics["users"]))
    return out

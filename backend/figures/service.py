"""Turns stored results into dpfl.plots figures (JSON); the browser only draws them."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from backend.models import Run
from backend.runs import service as runs
from backend.runs import settled
from dpfl import plots

__all__ = ["run_figures"]


def run_figures(session: Session, run_id: str, *, accountant: str | None) -> dict[str, Any]:
    """Returns one run's figures: learning curves, ε per round per party, partition histogram;
    a finished run's are built once per accountant (`settled.kept`)."""
    run = runs.get_run(session, run_id)
    runs.check_accountant(accountant)  # a non-private run's figures use none, but a name is checked
    return settled.kept(
        session,
        run,
        view="figures",
        accountant=accountant or "",
        delta=run.delta or 1e-5,  # the δ `runs.ledger` takes when none is asked
        compute=lambda: _run_figures(session, run, accountant=accountant),
    )


def _run_figures(session: Session, run: Run, *, accountant: str | None) -> dict[str, Any]:
    run_id = run.id
    metrics = runs.metrics(session, run_id)
    out: dict[str, Any] = {
        "learning": plots.to_json(
            plots.learning_curves(
                [
                    {
                        "round": m.round,
                        "accuracy": m.accuracy,
                        "balanced_accuracy": m.balanced_accuracy,
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
        if ledger.rounds:
            parties = {p: [0.0 if x is None else x for x in c] for p, c in ledger.parties.items()}
            # the title names the accountant; an ε that is not a sound bound is labelled there too
            label = ", ".join(
                [ledger.accountant]
                + (["approximate"] if ledger.approximate else [])
                + (["data-dependent"] if ledger.data_dependent else [])
            )
            out["epsilon"] = plots.to_json(
                plots.epsilon_per_party(parties, ledger.rounds, accountant=label, delta=ledger.delta)
            )
    diagnostics = run.diagnostics or {}  # not private; empty when withheld (protected runs)
    if diagnostics.get("label_histogram"):
        out["partition"] = plots.to_json(
            plots.label_histogram(diagnostics["label_histogram"], class_names=diagnostics.get("class_names"))
        )
    if diagnostics.get("users"):
        out["users"] = plots.to_json(plots.user_distribution(diagnostics["users"]))
    return out

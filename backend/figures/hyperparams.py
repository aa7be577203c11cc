"""A sweep's hyperparameters against its outcome: parallel coordinates and importance bars.

The runs are the sweep's succeeded ones. When some are private, only those are drawn: ε spent is
then an axis for every line, and the non-private reference runs (no ε) are listed in
``layout.meta.left_out``. A hyperparameter is any field of the run's spec that differs between
these runs, plus the σ the run used (calibrated from its ε target, or given; σ per silo as its
mean over silos, a number). Importance leaves out the seed, the privacy target and σ
(`dpfl.plots.NOT_HYPERPARAMETERS`).

The outcome is each run's final test value in its dataset's headline metric
(`dpfl.data.headline_metric`: balanced accuracy for Creditcard, accuracy elsewhere), which the
lines are coloured and the hyperparameters ranked by, the titles naming it; a run without a value
in that metric (recorded before balanced accuracy was) is not drawn and is listed in
``layout.meta.left_out``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.models import Run, RunStatus
from backend.sweeps import service as sweeps
from dpfl import plots
from dpfl.data import headline_metric
from dpfl.metrics import METRIC_NAMES, in_metric

__all__ = ["importance_figure", "parcoords_figure"]

_LABELS = {
    "noise_multiplier": "σ",
    "privacy.epsilon": "ε target",
    "privacy.noise_multiplier": "σ given",
    "privacy.delta": "δ",
}


def _runs(session: Session, sweep_id: str) -> tuple[list[dict[str, Any]], list[str], str]:
    """Returns the runs to draw ({id, params, epsilon, accuracy (in `metric`), metric, dataset}),
    the ids left out, and the subtitle.

    Raises:
        NotFound: the sweep does not exist (404).
    """
    sweep = sweeps.get_sweep(session, sweep_id)
    rows = session.execute(
        select(
            Run.id,
            Run.spec,
            Run.noise_multiplier,
            Run.epsilon,
            Run.final_accuracy,
            Run.final_balanced_accuracy,
            Run.dataset,
            Run.notion,
        )
        .where(Run.sweep_id == sweep.id, Run.status == RunStatus.succeeded, Run.final_accuracy.is_not(None))
        .order_by(Run.created_at, Run.id)
    ).all()
    runs, unmeasured = [], []
    for run_id, spec, sigma, epsilon, accuracy, balanced, dataset, notion in rows:
        metric = headline_metric(dataset)
        value = in_metric(metric, accuracy=accuracy, balanced_accuracy=balanced)
        if value is None:  # recorded before its dataset's metric was
            unmeasured.append((run_id, metric))
            continue
        runs.append(
            {
                "id": run_id,
                "params": plots.flatten(spec) | {"noise_multiplier": _mean(sigma)},
                "epsilon": epsilon,
                "accuracy": value,
                "metric": metric,
                "dataset": dataset,
                "private": notion != "none",
            }
        )
    drawn = [r for r in runs if r["private"]] or runs
    left_out = [r["id"] for r in runs if r not in drawn]
    note = f"{_counted(len(drawn), 'run')} of sweep {sweep.name or sweep.id}"
    if left_out:
        note += f" · {_counted(len(left_out), 'non-private run')} not drawn"
    for metric in sorted({m for _, m in unmeasured}):
        count = sum(m == metric for _, m in unmeasured)
        note += f" · {count} without {METRIC_NAMES.get(metric, metric)} not drawn"
    return drawn, left_out + [run_id for run_id, _ in unmeasured], note


def _counted(n: int, noun: str) -> str:
    """Returns `n` and `noun`, plural unless n is 1 ("1 run", "2 runs")."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _mean(sigma: float | list[float] | None) -> float | None:
    """Returns σ, or the mean of σ per silo: a number on its axis, not a category of arrays."""
    return sum(sigma) / len(sigma) if isinstance(sigma, list) and sigma else sigma


def parcoords_figure(session: Session, sweep_id: str) -> dict[str, Any]:
    """Returns one line per succeeded run across the varying hyperparameters, ε spent and its final
    value in its dataset's headline metric (the line's colour)."""
    runs, left_out, note = _runs(session, sweep_id)
    out = plots.to_json(plots.parallel_coordinates(runs, labels=_LABELS, subtitle=note))
    out["layout"]["meta"]["left_out"] = left_out
    return out


def importance_figure(session: Session, sweep_id: str) -> dict[str, Any]:
    """Returns each varying hyperparameter's between-group share of the variance of the runs' final
    value in their dataset's headline metric."""
    runs, left_out, note = _runs(session, sweep_id)
    shares = plots.importance(runs)
    outcome = plots.outcome_title(runs)
    out = plots.to_json(plots.importance_bars(shares, labels=_LABELS, subtitle=note, outcome=outcome))
    out["layout"]["meta"] |= {"importance": shares, "left_out": left_out}
    return out

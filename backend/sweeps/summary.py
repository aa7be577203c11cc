"""A sweep's results reduced to what the compare page plots: one row per (algorithm, configuration,
privacy target).

Pure functions over plain records, so the statistics are tested with numbers and no database.

- A row groups the succeeded runs of one algorithm and one configuration (`dpfl.configuration`:
  runs identical but for seed and target) at one target ε (runs given a noise multiplier
  instead are grouped by it): one run per seed. Accuracy is summarised
  by its mean and sample standard deviation (ddof = 1; undefined, so None, for one run), the
  ε actually spent by its mean and maximum. "Accuracy" is the run's dataset's headline metric
  (``Outcome.metric``: balanced accuracy for Creditcard), and a row says which; outcomes of two
  metrics are never averaged together.
- The Pareto frontier is taken over the private rows: lower ε and higher mean accuracy are
  both better, and a row is on the frontier unless another row has ε ≤ and accuracy ≥ with
  at least one strict. A row's ε is the mean ε its runs spent, never its target.
- The non-private rows (notion "none") are the reference line drawn across the plot.
- The compare figure (several sweeps, hand-picked runs) groups the same way within a *series*
  (the sweep or dataset an outcome is kept apart by, ``Outcome.series``) and keeps each cell's
  run ids for the drill-down (`compare_cells`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "compare_cells", "front", "pareto_front", "reference", "summary_rows"]


@dataclass(frozen=True)
class Outcome:
    """One succeeded run: how it was configured and what it reached.

    Attributes:
        target_epsilon: the ε it was calibrated to, None for a noise-multiplier target or a
            non-private run.
        noise_multiplier: the σ it was given instead of an ε target, else None.
        accuracy: final test accuracy in [0, 1] (in `metric`), None if it was never evaluated or
            that metric was not recorded.
        epsilon: the ε its ledger adds up to, None for a non-private run.
        run_id: the run, for the drill-down of a compare figure.
        series: what keeps it apart from the same algorithm's other outcomes in a compare
            figure (a sweep, a dataset); "" within one sweep.
        config: its configuration's key (`dpfl.configuration`): outcomes are averaged only
            within one, so only over seeds.
        setting: the fields that set its configuration apart from the same algorithm's others,
            in words ("δ = 0.1 · lr = 2"); "" when none do.
        metric: the test metric `accuracy` is in: its dataset's headline metric
            (`dpfl.data.headline_metric`), ``accuracy`` or ``balanced_accuracy``.
        dataset: the data it ran on, as runs are listed ("" where the caller keeps none).
    """

    algorithm: str
    notion: str
    target_epsilon: float | None
    noise_multiplier: float | None
    accuracy: float | None
    epsilon: float | None
    run_id: str | None = None
    series: str = ""
    config: str = ""
    setting: str = ""
    metric: str = "accuracy"
    dataset: str = ""


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None  # sample std, ddof = 1


def _row_key(row: dict[str, Any]) -> tuple:
    eps, sigma = row["target_epsilon"], row["noise_multiplier"]
    return (
        row["algorithm"],
        row["setting"] or "",
        eps is not None,
        eps or 0.0,
        sigma is not None,
        sigma or 0.0,
    )


def _groups(outcomes: Iterable[Outcome]) -> dict[tuple, list[Outcome]]:
    groups: dict[tuple, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        key = (o.algorithm, o.notion, o.target_epsilon, o.noise_multiplier, o.series, o.config)
        groups[(*key, o.metric, o.dataset)].append(o)
    return groups


def _row(members: Sequence[Outcome]) -> dict[str, Any]:
    first = members[0]
    accuracies = [o.accuracy for o in members if o.accuracy is not None]
    spent = [o.epsilon for o in members if o.epsilon is not None]
    return {
        "algorithm": first.algorithm,
        "setting": first.setting or None,
        "notion": first.notion,
        "target_epsilon": first.target_epsilon,
        "noise_multiplier": first.noise_multiplier,
        "n": len(members),
        "metric": first.metric,
        "dataset": first.dataset or None,
        "accuracy_mean": _mean(accuracies),
        "accuracy_std": _std(accuracies),
        "epsilon_mean": _mean(spent),
        "epsilon_max": max(spent) if spent else None,
    }


def summary_rows(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Returns one row per (algorithm, configuration, target ε, noise multiplier), sorted by
    algorithm, setting, then ε: a row averages only over seeds.

    Each row: algorithm, setting (what sets its configuration apart, or None), notion,
    target_epsilon, noise_multiplier, n (runs), metric (what the accuracy is in: `Outcome.metric`),
    accuracy_mean, accuracy_std (None when n = 1),
    epsilon_mean and epsilon_max (None for non-private rows).
    """
    return sorted((_row(members) for members in _groups(outcomes).values()), key=_row_key)


def compare_cells(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Returns `summary_rows` per series, each row with its ``series``, ``run_ids`` (sorted) and
    ``members``: ``[run_id, ε spent, accuracy]`` of each evaluated run, for bands and single runs.

    Sorted by series, then as `summary_rows`.
    """
    cells = [
        _row(members)
        | {
            "series": members[0].series,
            "run_ids": sorted(o.run_id for o in members if o.run_id),
            "members": sorted([o.run_id, o.epsilon, o.accuracy] for o in members if o.accuracy is not None),
        }
        for members in _groups(outcomes).values()
    ]
    return sorted(cells, key=lambda c: (c["series"], *_row_key(c)))


def front(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the `points` (dicts with ``epsilon`` and ``accuracy``) no other point dominates.

    A point is dominated when another has ε ≤ and accuracy ≥, with at least one strict.
    """

    def dominated(p: dict[str, Any]) -> bool:
        return any(
            q["epsilon"] <= p["epsilon"]
            and q["accuracy"] >= p["accuracy"]
            and (q["epsilon"] < p["epsilon"] or q["accuracy"] > p["accuracy"])
            for q in points
        )

    return [p for p in points if not dominated(p)]


def pareto_front(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the private rows on a Pareto frontier as {algorithm, epsilon, accuracy, notion,
    metric, dataset}, by ε: the ε its ledger spent (a paper calibration may spend far more than
    its target).

    One frontier per (notion, metric, dataset): ε of two notions are different units, and so are
    accuracies of two metrics or on two datasets, so no row beats another across them. Rows
    without a mean accuracy or an ε are left out.
    """
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        eps = row["epsilon_mean"]
        if row["notion"] != "none" and eps is not None and row["accuracy_mean"] is not None:
            point = {"algorithm": row["algorithm"], "epsilon": eps, "accuracy": row["accuracy_mean"]}
            point |= {"notion": row["notion"], "metric": row["metric"], "dataset": row.get("dataset")}
            groups[_unit(point)].append(point)
    points = [p for members in groups.values() for p in front(members)]
    return sorted(points, key=lambda p: (*_unit(p), p["epsilon"], -p["accuracy"], p["algorithm"]))


def _unit(point: dict[str, Any]) -> tuple[str, str, str]:
    """What a frontier point's ε and accuracy are measured in: its notion, metric and dataset."""
    return point["notion"], point["metric"], point["dataset"] or ""


def reference(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Returns the non-private rows as {algorithm, n, accuracy_mean, accuracy_std}: the reference line."""
    return [
        {k: row[k] for k in ("algorithm", "n", "accuracy_mean", "accuracy_std")}
        for row in rows
        if row["notion"] == "none"
    ]

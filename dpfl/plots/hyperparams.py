"""A sweep's hyperparameters against its outcome: parallel coordinates and importance bars.

Importance is ω², the bias-corrected share of the variance of final accuracy between the groups
of runs that share one hyperparameter's value (Hays 1963; the correlation ratio η² less what
chance alone puts between k groups of n runs):

    ω² = (SS_between − (k − 1)·MS_within) / (SS_total + MS_within),   MS_within = SS_within / (n − k).

η² rewards many categories (a value per run "explains" everything); ω² does not: a factor that
does nothing scores about 0 whatever its number of levels. It is exact and deterministic and
needs no model. Only hyperparameters enter: fields that vary, and vary on their own. The seed
and the privacy target (ε, μ or σ, and the σ a run used) are the sweep's repetition and its x
axis, not hyperparameters. A field the algorithm sets (each algorithm runs with one value of it,
e.g. its own default lr) is confounded with the algorithm: its share is the algorithm's, so it
is left out and named. So is a field with a distinct value in every run (no within-group
variance to compare with).

"Accuracy" is each run's final test value in its dataset's headline metric (a run's ``metric``,
`dpfl.data.headline_metric`: balanced accuracy for Creditcard, whose constant classifier is 0.998
accurate); the axis, the colour bar and the importance title name it (`outcome_title`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dpfl.batching import FREE_FIELDS
from dpfl.metrics import METRIC_NAMES
from dpfl.plots.colours import HIGHLIGHT_COLOUR
from dpfl.plots.layout import _floats, _hover, _layout, _no_data

__all__ = [
    "NOT_HYPERPARAMETERS",
    "flatten",
    "importance",
    "importance_bars",
    "outcome_title",
    "parallel_coordinates",
    "varying",
]

Run = Mapping[str, Any]
_MISSING = "–"

NOT_HYPERPARAMETERS = (*FREE_FIELDS, "noise_multiplier")
"""The fields runs of one configuration differ in (`dpfl.batching.FREE_FIELDS`: the seed and the
privacy target) and the σ a run used: never a hyperparameter whose importance is measured."""

DISTINCT = "a distinct value in every run"
SET_BY_ALGORITHM = "set by the algorithm"


def flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Returns `spec` as dotted keys ("params.lr", "privacy.epsilon"); lists stay whole values."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= flatten(value, f"{name}.")
        else:
            out[name] = value
    return out


def outcome_title(runs: Sequence[Run]) -> str:
    """Returns what the runs' ``accuracy`` is: "final accuracy", "final balanced accuracy", or, when
    their ``metric`` differs, each metric with its runs' ``dataset``: "final accuracy (mnist) ·
    balanced accuracy (creditcard)"."""
    datasets: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        datasets[run.get("metric") or "accuracy"].update([run["dataset"]] if run.get("dataset") else [])
    if len(datasets) <= 1:
        return f"final {_metric_name(next(iter(datasets), 'accuracy'))}"
    return "final " + " · ".join(
        _metric_name(m) + (f" ({', '.join(sorted(names))})" if names else "")
        for m, names in sorted(datasets.items())
    )


def _metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric.replace("_", " "))


def _level(value: Any) -> Any:
    """Returns a hashable stand-in for a hyperparameter value (lists and dicts as JSON)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def varying(runs: Sequence[Run]) -> list[str]:
    """Returns the hyperparameters (keys of each run's ``params``) that differ between runs, sorted.

    A key some runs lack (an algorithm's own params in a sweep over algorithms) varies too.
    """
    keys = sorted({k for run in runs for k in run["params"]})
    return [k for k in keys if len({_level(run["params"].get(k)) for run in runs}) > 1]


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def importance(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Returns each varying hyperparameter's ω² of final accuracy, largest first (see the module).

    Args:
        runs: ``{"params": {key: value}, "accuracy": float}``, one per finished run (``accuracy``
            in its dataset's headline metric).

    Each entry: ``{"parameter", "share" (ω² in [0, 1], None when left out), "levels" (distinct
    values), "left_out" (None, `DISTINCT` or `SET_BY_ALGORITHM`)}``. All shares are 0 when every
    run has the same accuracy.
    """
    ys = [float(run["accuracy"]) for run in runs]
    n = len(ys)
    mean = math.fsum(ys) / n if ys else 0.0
    total = math.fsum((y - mean) ** 2 for y in ys)
    algorithms = [_level(run["params"].get("algorithm")) for run in runs]
    out = []
    for key in varying(runs):
        if key in NOT_HYPERPARAMETERS:
            continue
        levels = [_level(run["params"].get(key)) for run in runs]
        groups: dict[Any, list[float]] = defaultdict(list)
        for level, y in zip(levels, ys, strict=True):
            groups[level].append(y)
        k, share, left_out = len(groups), None, None
        if key != "algorithm" and len(set(algorithms)) > 1 and _function_of(algorithms, levels):
            left_out = SET_BY_ALGORITHM
        elif k == n:
            left_out = DISTINCT
        elif total > 0:
            between = math.fsum(len(g) * (math.fsum(g) / len(g) - mean) ** 2 for g in groups.values())
            within = (total - between) / (n - k)
            share = max(0.0, (between - (k - 1) * within) / (total + within))
        else:
            share = 0.0
        out.append({"parameter": key, "share": share, "levels": k, "left_out": left_out})
    return sorted(out, key=lambda e: (e["share"] is None, -(e["share"] or 0.0), e["parameter"]))


def _function_of(causes: Sequence[Any], effects: Sequence[Any]) -> bool:
    """Returns whether every cause comes with one effect only (the effect is set by the cause)."""
    seen: dict[Any, Any] = {}
    return all(seen.setdefault(c, e) == e for c, e in zip(causes, effects, strict=True))


def _dimension(label: str, values: Sequence[Any]) -> dict[str, Any]:
    """Returns one parcoords axis: the numbers themselves, or categories at 0, 1, … named by ticktext."""
    if _numeric(values):
        return {"label": label, "values": _floats(values)}
    levels = sorted({_level(v) for v in values}, key=lambda v: (v is None, str(v)))
    index = {level: i for i, level in enumerate(levels)}
    return {
        "label": label,
        "values": [index[_level(v)] for v in values],
        "tickvals": list(range(len(levels))),
        "ticktext": [_MISSING if v is None else str(v) for v in levels],
    }


def parallel_coordinates(
    runs: Sequence[Run], *, labels: Mapping[str, str] | None = None, subtitle: str | None = None
) -> go.Figure:
    """Returns one line per run across its varying hyperparameters, ε spent and final accuracy.

    Args:
        runs: ``{"id": str, "params": {key: value}, "epsilon": float | None, "accuracy": float}``
            (optional ``metric``, the test metric ``accuracy`` is in, and ``dataset``).
            A hyperparameter some runs lack is drawn as a category, "–" for the missing value.
        labels: axis names for keys (e.g. ``{"noise_multiplier": "σ"}``); others keep their key.
        subtitle: the title's second line.

    Lines are coloured by final accuracy (in each run's metric; the last axis and the colour bar
    are titled by `outcome_title`). ε spent is an axis when every run has one.
    Parcoords lines carry no customdata in Plotly, so ``layout.meta.run_ids`` lists the runs in
    line order (a brushed selection maps back through it).
    """
    labels = labels or {}
    keys = varying(runs)
    dimensions = [_dimension(labels.get(k, k), [run["params"].get(k) for run in runs]) for k in keys]
    if runs and all(run.get("epsilon") is not None for run in runs):
        dimensions.append({"label": "ε spent", "values": _floats(run["epsilon"] for run in runs)})
    accuracy = _floats(run["accuracy"] for run in runs)
    outcome = outcome_title(runs)
    dimensions.append({"label": outcome, "values": accuracy})
    layout = _layout(kind="parcoords", title="Hyperparameters and outcome of each run", subtitle=subtitle)
    layout["meta"] = {**layout["meta"], "run_ids": [run["id"] for run in runs], "parameters": keys}
    fig = go.Figure(layout=layout)
    if not runs:
        return _no_data(fig, "no finished runs yet")
    fig.add_trace(
        go.Parcoords(
            dimensions=dimensions,
            line={
                "color": accuracy,
                "colorscale": "Viridis",
                "cmin": min(accuracy),
                "cmax": max(accuracy),
                "showscale": True,
                "colorbar": {"title": {"text": outcome}},
            },
            meta={"role": "runs"},
        )
    )
    return fig


def importance_bars(
    shares: Sequence[Mapping[str, Any]],
    *,
    labels: Mapping[str, str] | None = None,
    subtitle: str | None = None,
    outcome: str = "final accuracy",
) -> go.Figure:
    """Returns the `importance` entries as horizontal bars, the largest share on top; `outcome`
    names what the variance is of (`outcome_title` of the runs).

    Entries left out (a distinct value per run, or set by the algorithm) get no bar; the note
    under the title names them, by reason.
    """
    labels = labels or {}
    shown = [e for e in shares if e["share"] is not None]
    reasons: dict[str, list[str]] = defaultdict(list)
    for e in shares:
        if e["share"] is None:
            reasons[e.get("left_out") or DISTINCT].append(labels.get(e["parameter"], e["parameter"]))
    fig = go.Figure(
        layout=_layout(
            kind="importance",
            title=f"Share of the variance of {outcome} explained by each hyperparameter (ω²)",
            subtitle=subtitle,
            xaxis={
                "title": {"text": "ω², the share of variance less chance's (0: no effect)"},
                "range": [0, 1],
            },
            yaxis={"title": {"text": "hyperparameter"}, "type": "category", "autorange": "reversed"},
            showlegend=False,
        )
    )
    if reasons:
        fig.add_annotation(
            text="left out, " + "; ".join(f"{why}: {', '.join(names)}" for why, names in reasons.items()),
            name="left-out",
            xref="paper",
            yref="paper",
            x=0,
            y=-0.18,
            xanchor="left",
            showarrow=False,
        )
    if not shown:
        return _no_data(fig, "no hyperparameter varies on its own between finished runs")
    fig.add_trace(
        go.Bar(
            x=_floats(e["share"] for e in shown),
            y=[labels.get(e["parameter"], e["parameter"]) for e in shown],
            orientation="h",
            marker={"color": HIGHLIGHT_COLOUR},
            customdata=[[e["parameter"], int(e["levels"])] for e in shown],
            hovertemplate=_hover("<b>%{y}</b>", "ω² %{x:.3f}", "%{customdata[1]} values"),
            meta={"role": "importance"},
        )
    )
    return fig

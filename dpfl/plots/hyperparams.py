"""A sweep's hyperparameters against its outcome: parallel coordinates and importance bars.

Importance is the between-group share of the variance of final accuracy (the correlation ratio
η², "fANOVA-lite"): group the runs by the value of one hyperparameter and ask how much of the
spread of accuracy the group means alone reproduce, ``Σ_g n_g (ȳ_g − ȳ)² / Σ_i (y_i − ȳ)²``.
It is exact and deterministic, needs no model, and on a balanced full grid with additive
effects the shares are those effects' variance shares and add up to 1 (the known-answer test).
What it is not: additive in general. Confounded parameters (σ calibrated from the ε target)
each get the whole share they explain together, and with few runs per value the share is
biased upward (a value per run explains everything), so a parameter with a distinct value in
every run is left out rather than reported as explaining all of it.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dpfl.plots.colours import HIGHLIGHT_COLOUR
from dpfl.plots.layout import _floats, _hover, _layout, _no_data

__all__ = ["flatten", "importance", "importance_bars", "parallel_coordinates", "varying"]

Run = Mapping[str, Any]
_MISSING = "–"


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
    """Returns each varying hyperparameter's share of the variance of final accuracy, largest first.

    Args:
        runs: ``{"params": {key: value}, "accuracy": float}``, one per finished run.

    Each entry: ``{"parameter", "share" (η² in [0, 1], None when every run has its own value),
    "levels" (distinct values)}``. All shares are 0 when every run has the same accuracy.
    """
    ys = [float(run["accuracy"]) for run in runs]
    mean = math.fsum(ys) / len(ys) if ys else 0.0
    total = math.fsum((y - mean) ** 2 for y in ys)
    out = []
    for key in varying(runs):
        groups: dict[Any, list[float]] = defaultdict(list)
        for run, y in zip(runs, ys, strict=True):
            groups[_level(run["params"].get(key))].append(y)
        share = None
        if len(groups) < len(runs):
            between = math.fsum(len(g) * (math.fsum(g) / len(g) - mean) ** 2 for g in groups.values())
            share = between / total if total > 0 else 0.0
        out.append({"parameter": key, "share": share, "levels": len(groups)})
    return sorted(out, key=lambda e: (e["share"] is None, -(e["share"] or 0.0), e["parameter"]))


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
        runs: ``{"id": str, "params": {key: value}, "epsilon": float | None, "accuracy": float}``.
            A hyperparameter some runs lack is drawn as a category, "–" for the missing value.
        labels: axis names for keys (e.g. ``{"noise_multiplier": "σ"}``); others keep their key.
        subtitle: the title's second line.

    Lines are coloured by final accuracy. ε spent is an axis when every run has one.
    Parcoords lines carry no customdata in Plotly, so ``layout.meta.run_ids`` lists the runs in
    line order (a brushed selection maps back through it).
    """
    labels = labels or {}
    keys = varying(runs)
    dimensions = [_dimension(labels.get(k, k), [run["params"].get(k) for run in runs]) for k in keys]
    if runs and all(run.get("epsilon") is not None for run in runs):
        dimensions.append({"label": "ε spent", "values": _floats(run["epsilon"] for run in runs)})
    accuracy = _floats(run["accuracy"] for run in runs)
    dimensions.append({"label": "final accuracy", "values": accuracy})
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
                "colorbar": {"title": {"text": "final accuracy"}},
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
) -> go.Figure:
    """Returns the `importance` entries as horizontal bars, the largest share on top.

    Entries without a share (a distinct value per run) get no bar; the note under the title
    names them.
    """
    labels = labels or {}
    shown = [e for e in shares if e["share"] is not None]
    left_out = [labels.get(e["parameter"], e["parameter"]) for e in shares if e["share"] is None]
    fig = go.Figure(
        layout=_layout(
            kind="importance",
            title="Share of the variance of final accuracy explained by each hyperparameter",
            subtitle=subtitle,
            xaxis={"title": {"text": "between-group share of variance (η²)"}, "range": [0, 1]},
            yaxis={"title": {"text": "hyperparameter"}, "type": "category", "autorange": "reversed"},
            showlegend=False,
        )
    )
    if left_out:
        fig.add_annotation(
            text="left out, a distinct value in every run: " + ", ".join(left_out),
            name="left-out",
            xref="paper",
            yref="paper",
            x=0,
            y=-0.18,
            xanchor="left",
            showarrow=False,
        )
    if not shown:
        return _no_data(fig, "no hyperparameter varies between finished runs")
    fig.add_trace(
        go.Bar(
            x=_floats(e["share"] for e in shown),
            y=[labels.get(e["parameter"], e["parameter"]) for e in shown],
            orientation="h",
            marker={"color": HIGHLIGHT_COLOUR},
            customdata=[[e["parameter"], int(e["levels"])] for e in shown],
            hovertemplate=_hover("<b>%{y}</b>", "η² %{x:.3f}", "%{customdata[1]} values"),
            meta={"role": "importance"},
        )
    )
    return fig

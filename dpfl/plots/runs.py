"""Figures of single runs, round by round: accuracy against ε spent, and learning curves."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpfl.plots.colours import LOSS_COLOUR, TEST_COLOUR, TRAIN_COLOUR, algorithm_colour
from dpfl.plots.layout import _DASHES, _epsilon_axis, _floats, _hover, _layout, _no_data, _round_axis
from dpfl.plots.notions import epsilon_title, faceted_figure, notions_in

__all__ = ["PER_ROUND_METRICS", "accuracy_vs_spent", "learning_curves", "metric_per_round", "smoothed"]


def accuracy_vs_spent(
    runs: Sequence[Mapping[str, Any]], *, log_x: bool = False, subtitle: str | None = None
) -> go.Figure:
    """Returns test accuracy against the ε spent so far, one line per run, one panel per notion.

    Args:
        runs: ``{"id": str, "algorithm": str, "label": str, "rounds": [{"round": int,
            "accuracy": float, "epsilon": float | None}]}``, drawn in the order given; optional
            ``notion`` and ``delta`` (runs of different notions go to different panels, each ε
            axis titled with its notion). Rounds without an ε (a non-private run) have no place
            on this axis and are left out.
        log_x: draw ε on a log axis.
        subtitle: the title's second line (datasets, δ, rounds, accountants).

    Each trace has ``meta = {"role": "run", "run_id", "algorithm", "notion"}`` and each point
    ``customdata = [run_id, round]``.
    """
    private = [run for run in runs if any(r.get("epsilon") is not None for r in run["rounds"])]
    panels = notions_in(run.get("notion") for run in private) or [None]
    fig = faceted_figure(
        kind="accuracy_vs_spent",
        title="Test accuracy against ε spent",
        subtitle=subtitle,
        notions=panels,
        yaxis={"title": {"text": "test accuracy"}, "range": [0, 1]},
    )
    for col, notion in enumerate(panels, start=1):
        mine = [run for run in private if run.get("notion") == notion]
        title = (
            "ε spent so far"
            if notion is None
            else epsilon_title(notion, (r.get("delta") for r in mine), log=False)
        )
        fig.update_xaxes(
            _epsilon_axis(title, (r.get("epsilon") for run in mine for r in run["rounds"]), log=log_x),
            row=1,
            col=col,
        )
    dashes: dict[str, itertools.cycle[str]] = {}
    for run in runs:
        algorithm = run["algorithm"]
        dash = next(dashes.setdefault(algorithm, itertools.cycle(_DASHES)))
        rounds = sorted((r for r in run["rounds"] if r.get("epsilon") is not None), key=lambda r: r["round"])
        notion = run.get("notion")
        fig.add_trace(
            go.Scatter(
                x=_floats(r["epsilon"] for r in rounds),
                y=_floats(r["accuracy"] for r in rounds),
                mode="lines+markers",
                line={"color": algorithm_colour(algorithm), "dash": dash, "width": 2},
                marker={"size": 4},
                name=run["label"],
                customdata=[[run["id"], int(r["round"])] for r in rounds],
                hovertemplate=_hover(
                    f"<b>{run['label']}</b> ({algorithm})",
                    "round %{customdata[1]}",
                    "ε spent %{x:.3g}",
                    "accuracy %{y:.3f}",
                ),
                meta={"role": "run", "run_id": run["id"], "algorithm": algorithm, "notion": notion},
            ),
            row=1,
            col=panels.index(notion) + 1 if notion in panels else 1,
        )
    if not runs:
        _no_data(fig, "no runs selected")
    return fig


# what `metric_per_round` draws: the round record's key ↦ (axis title, figure title)
PER_ROUND_METRICS = {
    "accuracy": ("test accuracy", "Test accuracy per round"),
    "balanced_accuracy": ("test balanced accuracy", "Test balanced accuracy per round"),
    "loss": ("test loss", "Test loss per round"),
    "train_loss": ("training loss (not private)", "Training loss per round (not private)"),
    "epsilon": ("ε spent", "ε spent per round"),
}


def smoothed(values: Sequence[float | None], weight: float) -> list[float | None]:
    """Returns the exponential moving average of `values` with `weight` in [0, 1), debiased as
    TensorBoard's smoothing is (the first value is not pulled towards 0); a None stays None and
    leaves the average as it was."""
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing must be in [0, 1); got {weight}")
    out: list[float | None] = []
    average, seen = 0.0, 0
    for value in values:
        if value is None:
            out.append(None)
            continue
        seen += 1
        average = weight * average + (1 - weight) * value
        out.append(average / (1 - weight**seen))
    return out


def metric_per_round(
    runs: Sequence[Mapping[str, Any]],
    *,
    metric: str = "accuracy",
    log_y: bool = False,
    smoothing: float = 0.0,
    subtitle: str | None = None,
) -> go.Figure:
    """Returns a metric of several runs per round, one line per run: a point's drill-down, or runs
    picked to overlay.

    Args:
        runs: ``{"id": str, "algorithm": str, "seed": int, "label": str, "rounds": [{"round":
            int, <metric>: float | None}]}``, drawn in the order given. The colour is the
            algorithm's, the dash the seed's (the same seed has the same dash in every algorithm).
        metric: a key of `PER_ROUND_METRICS`; the training loss is labelled "not private".
        log_y: a log-scale y axis.
        smoothing: the weight of an exponential moving average in [0, 1); above 0 the raw values
            stay as faint markers under the smoothed line.
        subtitle: the title's second line (datasets, δ, rounds, accountants).

    Each run's line has ``meta = {"role": "run", "run_id", "algorithm", "seed"}`` (raw markers
    under a smoothed line: ``role: "raw"``) and each point ``customdata = [run_id, round]``.

    Raises:
        ValueError: an unknown metric, or smoothing outside [0, 1).
    """
    if metric not in PER_ROUND_METRICS:
        raise ValueError(f"metric must be one of {', '.join(PER_ROUND_METRICS)}; got {metric!r}")
    axis_title, title = PER_ROUND_METRICS[metric]
    yaxis: dict[str, Any] = {"title": {"text": axis_title}}
    if log_y:
        yaxis["type"] = "log"
    elif metric in ("accuracy", "balanced_accuracy"):
        yaxis["range"] = [0, 1]
    fig = go.Figure(
        layout=_layout(
            kind=f"{metric}_per_round",
            title=title,
            subtitle=subtitle,
            xaxis=_round_axis(int(r["round"]) for run in runs for r in run["rounds"]),
            yaxis=yaxis,
        )
    )
    seeds = sorted({int(run["seed"]) for run in runs})
    for run in runs:
        algorithm, seed = run["algorithm"], int(run["seed"])
        rounds = sorted(run["rounds"], key=lambda r: r["round"])
        x = [int(r["round"]) for r in rounds]
        # a round without the metric (withheld, or not measured) is a gap in the line
        y = [None if r.get(metric) is None else float(r[metric]) for r in rounds]
        meta = {"role": "run", "run_id": run["id"], "algorithm": algorithm, "seed": seed}
        colour, dash = algorithm_colour(algorithm), _DASHES[seeds.index(seed) % len(_DASHES)]
        customdata = [[run["id"], xi] for xi in x]
        if smoothing > 0:
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="markers",
                    marker={"size": 4, "color": colour},
                    opacity=0.3,
                    showlegend=False,
                    customdata=customdata,
                    hoverinfo="skip",
                    meta=meta | {"role": "raw"},
                )
            )
            y = smoothed(y, smoothing)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines" if smoothing > 0 else "lines+markers",
                line={"color": colour, "dash": dash, "width": 2},
                marker={"size": 4},
                name=run["label"],
                customdata=customdata,
                hovertemplate=_hover(f"<b>{run['label']}</b>", "round %{x}", f"{axis_title} %{{y:.4g}}"),
                meta=meta,
            )
        )
    if not runs:
        _no_data(fig, "no runs selected")
    return fig


_DASH_OF = {"train_loss": "dash", "balanced_accuracy": "dot"}  # a curve sharing its panel's colour


def learning_curves(rounds: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Returns one run's test accuracy (top) and loss (bottom) per round, sharing the round axis.

    Args:
        rounds: the run's evaluated rounds, ``{"round": int, "accuracy": float, "loss": float,
            "balanced_accuracy": float (optional), "train_loss": float (optional)}``, in any
            order. The balanced accuracy is drawn beside the accuracy when any round has one; the
            training loss when any round has one, named "not private" (a diagnostic: it reads the
            training records without noise).
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    axis = _round_axis(int(r["round"]) for r in rounds)
    fig.update_layout(
        _layout(
            kind="learning_curves",
            title="Learning curves",
            yaxis={"title": {"text": "test accuracy"}, "range": [0, 1]},
            yaxis2={"title": {"text": "loss"}, "rangemode": "tozero"},
            xaxis={k: v for k, v in axis.items() if k != "title"},  # the top panel's grid
            xaxis2=axis,
        )
    )
    ordered = sorted(rounds, key=lambda r: r["round"])
    curves = [("test accuracy", "accuracy", TEST_COLOUR, 1), ("test loss", "loss", LOSS_COLOUR, 2)]
    if any(r.get("balanced_accuracy") is not None for r in ordered):
        curves.insert(1, ("test balanced accuracy", "balanced_accuracy", TEST_COLOUR, 1))
    if any(r.get("train_loss") is not None for r in ordered):
        curves.append(("train loss (not private)", "train_loss", TRAIN_COLOUR, 2))
    for name, key, colour, row in curves:
        shown = [r for r in ordered if r.get(key) is not None]
        fig.add_trace(
            go.Scatter(
                x=[int(r["round"]) for r in shown],
                y=_floats(r[key] for r in shown),
                mode="lines",
                line={"color": colour, "width": 2, "dash": _DASH_OF.get(key, "solid")},
                name=name,
                hovertemplate=_hover(f"<b>{name}</b>", "round %{x}", "%{y:.4g}"),
                meta={"role": key},
            ),
            row=row,
            col=1,
        )
    if not ordered:
        _no_data(fig, "no evaluated rounds yet")
    return fig

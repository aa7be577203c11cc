"""Figures of single runs, round by round: accuracy against ε spent, and learning curves."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpfl.plots.colours import TEST_COLOUR, TRAIN_COLOUR, algorithm_colour
from dpfl.plots.layout import _DASHES, _epsilon_axis, _floats, _hover, _layout, _no_data

__all__ = ["accuracy_vs_spent", "learning_curves"]



def accuracy_vs_spent(runs: Sequence[Mapping[str, Any]], *, log_x: bool = False) -> go.Figure:
    """Returns test accuracy against the ε spent so far, one line per run, one point per round.

    Args:
        runs: ``{"id": str, "algorithm": str, "label": str, "rounds": [{"round": int,
            "accuracy": float, "epsilon": float | None}]}``, drawn in the order given. Rounds
            without an ε (a non-private run) have no place on this axis and are left out.
        log_x: draw ε on a log axis.

    Each trace has ``meta = {"role": "run", "run_id", "algorithm"}`` and each point
    ``customdata = [run_id, round]``.
    """
    fig = go.Figure(
        layout=_layout(
            kind="accuracy_vs_spent",
            title="Test accuracy against ε spent",
            xaxis=_epsilon_axis(
                "ε spent so far", (r.get("epsilon") for run in runs for r in run["rounds"]), log=log_x
            ),
            yaxis={"title": {"text": "test accuracy"}, "range": [0, 1]},
        )
    )
    dashes: dict[str, itertools.cycle[str]] = {}
    for run in runs:
        algorithm = run["algorithm"]
        dash = next(dashes.setdefault(algorithm, itertools.cycle(_DASHES)))
        rounds = sorted((r for r in run["rounds"] if r.get("epsilon") is not None), key=lambda r: r["round"])
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
                meta={"role": "run", "run_id": run["id"], "algorithm": algorithm},
            )
        )
    if not runs:
        _no_data(fig, "no runs selected")
    return fig


def learning_curves(rounds: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Returns one run's test accuracy (top) and loss (bottom) per round, sharing the round axis.

    Args:
        rounds: the run's evaluated rounds, ``{"round": int, "accuracy": float, "loss": float,
            "train_loss": float (optional)}``, in any order. The training loss is drawn when any
            round has one, named "not private" (a diagnostic: it reads the training records
            without noise).
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.update_layout(
        _layout(
            kind="learning_curves",
            title="Learning curves",
            yaxis={"title": {"text": "test accuracy"}, "range": [0, 1]},
            yaxis2={"title": {"text": "loss"}, "rangemode": "tozero"},
            xaxis2={"title": {"text": "round"}},
        )
    )
    ordered = sorted(rounds, key=lambda r: r["round"])
    curves = [("test accuracy", "accuracy", TEST_COLOUR, 1), ("test loss", "loss", TEST_COLOUR, 2)]
    if any(r.get("train_loss") is not None for r in ordered):
        curves.append(("train loss (not private)", "train_loss", TRAIN_COLOUR, 2))
    for name, key, colour, row in curves:
        shown = [r for r in ordered if r.get(key) is not None]
        fig.add_trace(
            go.Scatter(
                x=[int(r["round"]) for r in shown],
                y=_floats(r[key] for r in shown),
                mode="lines",
                line={"color": colour, "width": 2, "dash": "dash" if key == "train_loss" else "solid"},
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

"""The compare page's figure: final test accuracy against ε, one curve per algorithm.

Every trace carries ``meta = {"role": …, "algorithm": …}`` with role ``mean``, ``band`` or
``pareto``; points carry ``customdata = [algorithm, epsilon]``, so the browser maps a click
back to the sweep cell it came from without parsing hover text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from dpfl.plots.colours import _translucent, algorithm_colour
from dpfl.plots.layout import _epsilon_axis, _floats, _layout, _no_data

__all__ = ["tradeoff"]

_BAND_ALPHA = 0.18
_FRONTIER_COLOUR = "#000000"

Point = Mapping[str, Any]


def tradeoff(
    points: Sequence[Point],
    *,
    reference: Point | Sequence[Point] | None = None,
    pareto: Sequence[Point] | None = None,
    log_x: bool = True,
    title: str = "Final test accuracy against ε",
) -> go.Figure:
    """Returns final accuracy against ε: a line and a ±1 std band per algorithm.

    Args:
        points: one per (algorithm, ε) cell of a sweep, aggregated over seeds:
            ``{"algorithm": str, "epsilon": float, "mean": float, "std": float | None, "n": int}``.
            ``std`` is None when fewer than two seeds finished; the band then has no width there.
        reference: the non-private result(s), ``{"algorithm", "mean", "std", "n"}`` or a list of
            them, each drawn as a dashed horizontal line across the whole ε axis.
        pareto: the frontier points ``{"algorithm", "epsilon", "mean"}``, in any order.
        log_x: draw ε on a log axis (sweeps usually span ε = 0.1 … 10).
        title: the figure's title.

    Raises:
        ValueError: if `log_x` and a point has ε ≤ 0 or not finite, which a log axis cannot show.
    """
    references = [reference] if isinstance(reference, Mapping) else list(reference or ())
    if log_x:
        _check_log_epsilons([*points, *(pareto or ())])
    fig = go.Figure(
        layout=_layout(
            kind="tradeoff",
            title=title,
            xaxis=_epsilon_axis("ε (log scale)" if log_x else "ε", (p["epsilon"] for p in points), log=log_x),
            yaxis={"title": {"text": "test accuracy"}, "range": [0, 1]},
        )
    )
    for algorithm in sorted({p["algorithm"] for p in points}):
        cells = sorted((p for p in points if p["algorithm"] == algorithm), key=lambda p: p["epsilon"])
        band = _band(algorithm, cells)
        if band is not None:
            fig.add_trace(band)  # before its line, so the line is drawn on top
        fig.add_trace(_mean_line(algorithm, cells))
    for ref in references:
        _add_reference(fig, ref)
    if pareto:
        fig.add_trace(_frontier(pareto))
    if not points:
        _no_data(fig, "no finished runs yet")
    return fig


def _check_log_epsilons(points: Sequence[Point]) -> None:
    """Raises ValueError naming the first point a log ε axis cannot place."""
    for p in points:
        eps = p["epsilon"]
        if eps is None or not (math.isfinite(eps) and eps > 0):
            raise ValueError(
                f"`epsilon` of {p['algorithm']!r} must be a finite number > 0 on a log ε axis; got {eps}. "
                "Pass a non-private result as `reference`, or use log_x=False."
            )


def _band(algorithm: str, cells: Sequence[Point]) -> go.Scatter | None:
    """Returns the filled mean ± std area of one algorithm, or None if no cell has a std.

    One closed polygon (upper edge left to right, lower edge back) rather than two traces joined
    by ``fill="tonexty"``, which would depend on the order of every other trace in the figure.
    """
    if all(c.get("std") is None for c in cells):
        return None
    eps = _floats(c["epsilon"] for c in cells)
    upper = [c["mean"] + (c.get("std") or 0.0) for c in cells]
    lower = [c["mean"] - (c.get("std") or 0.0) for c in cells]
    return go.Scatter(
        x=eps + eps[::-1],
        y=_floats(upper + lower[::-1]),
        mode="lines",
        fill="toself",
        fillcolor=_translucent(algorithm_colour(algorithm), _BAND_ALPHA),
        line={"width": 0},
        name=f"{algorithm} ± 1 std",
        legendgroup=algorithm,
        showlegend=False,
        hoverinfo="skip",
        meta={"role": "band", "algorithm": algorithm},
    )


def _mean_line(algorithm: str, cells: Sequence[Point]) -> go.Scatter:
    """Returns one algorithm's mean accuracy against ε, one marker per sweep cell."""
    return go.Scatter(
        x=_floats(c["epsilon"] for c in cells),
        y=_floats(c["mean"] for c in cells),
        mode="lines+markers",
        line={"color": algorithm_colour(algorithm), "width": 2},
        marker={"size": 7},
        name=algorithm,
        legendgroup=algorithm,
        customdata=[[algorithm, float(c["epsilon"])] for c in cells],
        hovertext=[_cell_text(c) for c in cells],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={"role": "mean", "algorithm": algorithm},
    )


def _cell_text(cell: Point) -> str:
    """Returns the hover text of one result: algorithm, ε (or "non-private"), mean ± std, seeds."""
    eps = cell.get("epsilon")
    privacy = "non-private" if eps is None else f"ε = {eps:.3g}"
    std = cell.get("std")
    spread = "" if std is None else f" ± {std:.3f}"
    n = cell.get("n")
    seeds = "" if n is None else f"<br>{n} seed{'s' if n != 1 else ''}"
    return f"<b>{cell['algorithm']}</b><br>{privacy}<br>accuracy {cell['mean']:.3f}{spread}{seeds}"


def _add_reference(fig: go.Figure, ref: Point) -> None:
    """Adds a non-private result as a dashed line (and its ± std band) spanning the ε axis.

    A layout shape in axis-domain coordinates, not a trace: it spans the plot whatever the ε range
    and does not widen it.
    """
    colour = algorithm_colour(ref["algorithm"])
    name = f"non-private {ref['algorithm']}"
    std = ref.get("std")
    if std is not None:
        fig.add_hrect(
            y0=ref["mean"] - std,
            y1=ref["mean"] + std,
            fillcolor=colour,
            opacity=0.1,
            line_width=0,
            layer="below",
            legendgroup=name,
        )
    fig.add_hline(
        y=float(ref["mean"]),
        line={"color": colour, "dash": "dash", "width": 2},
        name=name,
        legendgroup=name,
        showlegend=True,
        annotation_text=f"{name}: {ref['mean']:.3g}",
        annotation_position="top left",
        annotation_font_color=colour,
        annotation_hovertext=_cell_text({**ref, "epsilon": None}),
    )


def _frontier(pareto: Sequence[Point]) -> go.Scatter:
    """Returns the Pareto frontier as a staircase with a ring on each frontier point.

    The step is horizontal first (``hv``): between two frontier points the best accuracy known for
    a budget is the one of the cheaper point, until the next point is affordable.
    """
    cells = sorted(pareto, key=lambda p: (p["epsilon"], p["mean"]))
    return go.Scatter(
        x=_floats(c["epsilon"] for c in cells),
        y=_floats(c["mean"] for c in cells),
        mode="lines+markers",
        line={"color": _FRONTIER_COLOUR, "width": 3, "shape": "hv"},
        marker={"symbol": "circle-open", "size": 15, "color": _FRONTIER_COLOUR, "line": {"width": 2}},
        name="Pareto frontier",
        customdata=[[c["algorithm"], float(c["epsilon"])] for c in cells],
        hovertext=[f"Pareto frontier<br>{_cell_text(c)}" for c in cells],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={"role": "pareto"},
    )

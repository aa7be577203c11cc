"""The pieces every figure shares: the layout, the empty-figure message, hover text, JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

from dpfl.plots.colours import FAINT_GREY

__all__ = ["to_json"]

_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 13}
_MARGIN = {"l": 64, "r": 24, "t": 56, "b": 56}
_MARGIN_WITH_SUBTITLE = {**_MARGIN, "t": 84}


def _layout(*, kind: str, title: str, subtitle: str | None = None, **overrides: Any) -> dict[str, Any]:
    """Returns the layout every figure starts from, with `overrides` (axes, barmode, …) on top.

    Args:
        kind: the figure's name, stored as ``layout.meta.figure`` so the browser knows how to read
            a click. It is also the default ``uirevision``: ``Plotly.react`` then keeps the user's
            zoom and hidden legend entries while live updates redraw the figure. The browser sets
            its own (e.g. the run id) when the figure's subject changes.
        title: the figure's title.
        subtitle: a second, smaller title line (what the runs were: dataset, δ, rounds, …). It is
            part of the title, so an exported PNG carries it.
        **overrides: any layout property; replaces the default of the same name.
    """
    heading: dict[str, Any] = {"text": title, "x": 0.01, "xanchor": "left"}
    if subtitle:
        heading["subtitle"] = {"text": subtitle}
    return {
        "template": "plotly_white",
        "font": _FONT,
        "margin": _MARGIN_WITH_SUBTITLE if subtitle else _MARGIN,
        "title": heading,
        "hovermode": "closest",
        "meta": {"figure": kind},
        "uirevision": kind,
        **overrides,
    }


# Lines of one algorithm share its colour, so the dash tells them apart (runs, seeds, sweeps).
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")

_MAX_VALUE_TICKS = 8


def _round_axis(rounds: Iterable[int]) -> dict[str, Any]:
    """Returns a round axis: rounds are whole, so a short run is ticked at each round (Plotly's own
    ticks over rounds 1 to 2 read 1, 1.2, 1.4, …); a longer one keeps Plotly's, whole already."""
    last = max(rounds, default=0)
    return {"title": {"text": "round"}} | ({"dtick": 1} if last < 10 else {})


def _epsilon_axis(title: str, values: Iterable[float | None], *, log: bool) -> dict[str, Any]:
    """Returns an ε axis, linear or log; a log axis is ticked at numbers (`_log_ticks`)."""
    if not log:
        return {"title": {"text": title}, "type": "linear"}
    return {"title": {"text": title}, "type": "log", **_log_ticks(values)}


def _log_ticks(values: Iterable[float | None]) -> dict[str, Any]:
    """Returns tick values and labels for a log axis over `values` (those > 0 and finite).

    Plotly labels a log axis spanning about a decade with bare digits (0.5 shows as "5"); a
    sweep's few ε values become the ticks themselves, and many values get 1-2-5 ticks.
    """
    distinct = sorted({float(f"{v:.3g}") for v in values if v is not None and 0 < v < math.inf})
    if not distinct:
        return {}
    if len(distinct) <= _MAX_VALUE_TICKS:
        ticks = distinct
    else:
        low, high = distinct[0], distinct[-1]
        decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        ticks = [m * 10.0**d for d in decades for m in (1, 2, 5) if low / 1.5 <= m * 10.0**d <= high * 1.5]
        ticks = [float(f"{t:.3g}") for t in ticks]
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def _no_data(fig: go.Figure, message: str) -> go.Figure:
    """Returns `fig` with `message` centred on it, the figure's answer to empty input."""
    fig.add_annotation(
        text=message,
        name="no-data",
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 16, "color": FAINT_GREY},
    )
    return fig


def _hover(*lines: str) -> str:
    """Returns a hovertemplate of `lines`, without Plotly's secondary box (the trace name)."""
    return "<br>".join(lines) + "<extra></extra>"


def _floats(values: Iterable[Any]) -> list[float]:
    """Returns `values` as Python floats.

    Plotly 6+ writes NumPy arrays as base64 typed arrays; plain lists keep the figure JSON readable
    by the tests, the CSV export and anyone reading the API's answer.
    """
    return [float(v) for v in values]


def to_json(fig: go.Figure) -> dict[str, Any]:
    """Returns the figure as the JSON object the API sends and ``Plotly.react`` draws.

    Non-finite numbers (an ε of ∞) become ``null``, so the result always passes
    ``json.dumps(..., allow_nan=False)``.
    """
    return json.loads(fig.to_json())

"""Figures over the parties of one run: ε spent per party, labels per silo, users across silos."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpfl.formats import number_text
from dpfl.plots.colours import FAINT_GREY, HIGHLIGHT_COLOUR, _translucent
from dpfl.plots.layout import _floats, _hover, _layout, _no_data, _round_axis
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL

__all__ = ["epsilon_per_party", "label_histogram", "user_distribution"]

# Beyond this many parties individual lines are unreadable anyway: draw them faint and let the
# maximum, which is the run's ε (the run is as private as its least private party), stand out.
_MANY_PARTIES = 30
# Beyond this many classes (CIFAR-100) the legend would crowd out the chart; hover still names them.
_MAX_LEGEND_CLASSES = 20


def epsilon_per_party(
    parties: Mapping[str, Sequence[float]], rounds: Sequence[int], *, accountant: str, delta: float
) -> go.Figure:
    """Returns the cumulative ε each party has spent after each round, one line per party.

    Args:
        parties: party ↦ its ε after each of `rounds`, e.g. ``Ledger.epsilon_curves(...)``:
            ``{"silo-0": [0.1, 0.15, …], …}``; lists or NumPy arrays.
        rounds: the round numbers the values refer to.
        accountant: the accountant that computed the values, named in the title.
        delta: the δ the values are for, named in the title.

    With more than 30 parties each is a thin grey line and the element-wise maximum over parties
    is added in colour (``meta.role == "max"``).

    Raises:
        ValueError: if a party's values do not have one entry per round.
    """
    xs = [int(r) for r in rounds]
    curves = {party: _floats(values) for party, values in parties.items()}
    for party, ys in curves.items():
        if len(ys) != len(xs):
            raise ValueError(f"party {party!r} has {len(ys)} ε values; expected one per round ({len(xs)}).")
    fig = go.Figure(
        layout=_layout(
            kind="epsilon_per_party",
            title=f"ε spent per party ({accountant}, δ = {number_text(delta)})",
            xaxis=_round_axis(xs),
            yaxis={"title": {"text": "ε spent so far"}, "rangemode": "tozero"},
        )
    )
    many = len(curves) > _MANY_PARTIES
    for i, (party, ys) in enumerate(curves.items()):
        style = {"line": {"width": 2}, "name": party}
        if many:  # one legend entry stands for all the faint lines
            style = {
                "line": {"width": 0.8, "color": _translucent(FAINT_GREY, 0.4)},
                "name": f"each of {len(curves)} parties",
                "legendgroup": "parties",
                "showlegend": i == 0,
            }
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                hovertemplate=_hover(f"<b>{party}</b>", "round %{x}", "ε %{y:.3g}"),
                meta={"role": "party", "party": party},
                **style,
            )
        )
    if many:
        top = [max(column) for column in zip(*curves.values(), strict=True)]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=top,
                mode="lines",
                line={"width": 2.5, "color": HIGHLIGHT_COLOUR},
                name="max over parties",
                hovertemplate=_hover("<b>max over parties</b>", "round %{x}", "ε %{y:.3g}"),
                meta={"role": "max"},
            )
        )
    if not curves:
        _no_data(fig, "no privacy spent")
    return fig


def label_histogram(
    histogram: Sequence[Sequence[int]], *, class_names: Sequence[str] | None = None
) -> go.Figure:
    """Returns the records each silo holds as stacked bars, one segment per class.

    Args:
        histogram: ``[num_silos][num_classes]`` record counts, e.g. ``RunResult.label_histogram``
            (list of lists or a NumPy array). Silo ``i`` is labelled ``silo-i``, as in the ledger.
        class_names: one name per class; ``class 0``, ``class 1``, … when None.

    Raises:
        ValueError: if the rows differ in length, or `class_names` has the wrong length.
    """
    counts = [[int(c) for c in row] for row in histogram]
    num_classes = len(counts[0]) if counts else 0
    if any(len(row) != num_classes for row in counts):
        raise ValueError(f"every silo's row of `histogram` must have {num_classes} classes, like silo-0's.")
    names = [f"class {c}" for c in range(num_classes)] if class_names is None else list(class_names)
    if len(names) != num_classes:
        raise ValueError(f"`class_names` has {len(names)} names; the histogram has {num_classes} classes.")
    silos = [f"silo-{i}" for i in range(len(counts))]
    fig = go.Figure(
        layout=_layout(
            kind="label_histogram",
            title="Labels per silo",
            subtitle=DIAGNOSTICS_LABEL,
            barmode="stack",
            showlegend=num_classes <= _MAX_LEGEND_CLASSES,
            xaxis={"title": {"text": "silo"}, "type": "category"},
            yaxis={"title": {"text": "records"}},
        )
    )
    for c, name in enumerate(names):
        fig.add_trace(
            go.Bar(
                x=silos,
                y=[row[c] for row in counts],
                name=name,
                hovertemplate=_hover("<b>%{x}</b>", f"{name}: %{{y}} records"),
                meta={"role": "class", "class": c},
            )
        )
    if not counts:
        _no_data(fig, "no partition")
    return fig


def user_distribution(users: Mapping[str, Any]) -> go.Figure:
    """Returns how records spread over users: records per user (histogram) and silos per user.

    Args:
        users: ``RunResult.users`` (``UserAllocation.summary()``): ``records_per_user`` (N_u per
            user), ``silos_per_user`` (users with records in exactly k silos, k = 0..S).
    """
    records = np.asarray(users.get("records_per_user", []), dtype=np.int64)
    silos = list(users.get("silos_per_user", []))
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("records per user", "silos per user"), horizontal_spacing=0.12
    )
    fig.update_layout(
        _layout(
            kind="user_distribution",
            title=f"Users across silos ({users.get('kind', '?')})",
            subtitle=DIAGNOSTICS_LABEL,
            showlegend=False,
        )
    )
    if records.size == 0:
        return _no_data(fig, "no users")
    # Integer-aligned bins: one per count when the range is small, else about 30 of equal width.
    lo, hi = int(records.min()), int(records.max())
    width = max(1, math.ceil((hi - lo + 1) / 30))
    edges = np.arange(lo, hi + width + 1, width)
    counts, _ = np.histogram(records, bins=edges)
    fig.add_trace(
        go.Bar(
            x=[f"{a}" if width == 1 else f"{a}–{b - 1}" for a, b in itertools.pairwise(edges)],
            y=counts.tolist(),
            marker={"color": HIGHLIGHT_COLOUR},
            hovertemplate=_hover("<b>%{x} records</b>", "%{y} users"),
            meta={"role": "records_per_user"},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=[str(k) for k in range(1, len(silos))],
            y=silos[1:],
            marker={"color": HIGHLIGHT_COLOUR},
            hovertemplate=_hover("<b>%{x} silos</b>", "%{y} users"),
            meta={"role": "silos_per_user"},
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="records N_u", type="category", row=1, col=1)
    fig.update_xaxes(title_text="silos holding the user's records", type="category", row=1, col=2)
    fig.update_yaxes(title_text="users", row=1, col=1)
    return fig

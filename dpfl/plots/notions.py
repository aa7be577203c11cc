"""ε is not one unit: the privacy notion on every ε axis, one panel per notion, and the subtitle.

Record-, user-, agent- and instance-level DP protect different neighbours (one record, all of a
user's records, a whole silo, …), and a GDP run's ε is converted from μ. An ε of 2 in one is no
match for an ε of 2 in another, so a figure whose runs mix notions draws one panel per notion,
each axis titled with its notion, and says so in ``layout.meta.warning``; ``layout.meta.notions``
lists the notions drawn, in the order of the panels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpfl.formats import number_text
from dpfl.plots.layout import _layout

__all__ = [
    "NOTION_LABELS",
    "compare_subtitle",
    "delta_text",
    "epsilon_title",
    "faceted_figure",
    "mixed_warning",
    "notions_in",
]

# Panel order: from the finest neighbour to the coarsest.
NOTION_LABELS = {
    "record": "record-level DP",
    "gdp": "μ-GDP, record-level",
    "instance": "instance-level DP",
    "agent": "agent-level DP",
    "user": "user-level DP",
}

_PANEL_GAP = 0.06


def delta_text(delta: float) -> str:
    """Returns δ as people write it: 1e-5, 2.5e-6, 0.001 (not Python's 1e-05; `number_text`)."""
    return number_text(delta)


def _notion_label(notion: str) -> str:
    return NOTION_LABELS.get(notion, f"{notion}-level DP")


def epsilon_title(notion: str | None, deltas: Iterable[float | None], *, log: bool) -> str:
    """Returns an ε axis title naming the notion and δ: "ε (user-level DP), δ = 1e-5".

    Without a notion (callers that do not know it, like the paper reports' other x axes) the
    title is the bare "ε", with "(log scale)" on a log axis as before.
    """
    if notion is None:
        return "ε (log scale)" if log else "ε"
    text = f"ε ({_notion_label(notion)})"
    distinct = sorted({float(d) for d in deltas if d is not None})
    if len(distinct) == 1:
        text += f", δ = {delta_text(distinct[0])}"
    elif distinct:
        text += ", δ mixed: " + ", ".join(delta_text(d) for d in distinct)
    return text


def notions_in(notions: Iterable[str | None]) -> list[str | None]:
    """Returns the distinct notions in panel order; None (unknown) last."""
    found = set(notions)
    known = [n for n in NOTION_LABELS if n in found]
    other = sorted(n for n in found if n is not None and n not in NOTION_LABELS)
    return known + other + ([None] if None in found else [])


def mixed_warning(notions: Sequence[str | None]) -> str | None:
    """Returns the warning a figure shows when its ε axes are in different notions, else None."""
    named = [n for n in notions if n is not None]
    if len(named) < 2:
        return None
    labels = ", ".join(_notion_label(n) for n in named)
    return (
        f"These runs use {len(named)} privacy notions ({labels}). Their ε are different units, "
        "so each notion has its own panel: do not compare ε across panels."
    )


def faceted_figure(
    *, kind: str, title: str, subtitle: str | None, notions: Sequence[str | None], yaxis: Mapping[str, Any]
) -> go.Figure:
    """Returns an empty figure with one panel per notion side by side, sharing the y axis.

    ``layout.meta`` gets ``notions`` (the named notions, in panel order) and ``warning`` (None
    unless they mix). The caller titles each x axis (`epsilon_title`) and adds the traces to
    ``col = notions.index(notion) + 1``.
    """
    panels = max(1, len(notions))
    fig = make_subplots(rows=1, cols=panels, shared_yaxes=True, horizontal_spacing=_PANEL_GAP)
    layout = _layout(kind=kind, title=title, subtitle=subtitle)
    layout["meta"] = {
        **layout["meta"],
        "notions": [n for n in notions if n is not None],
        "warning": mixed_warning(notions),
    }
    fig.update_layout(layout)
    fig.update_yaxes(yaxis, row=1, col=1)
    return fig


def compare_subtitle(runs: Iterable[Mapping[str, Any]]) -> str:
    """Returns what the compared runs were: "digits · δ = 1e-5 · 30 rounds · rdp".

    Args:
        runs: ``{"dataset", "delta", "rounds", "accountant"}`` per run; None values (a
            non-private run has no δ or accountant) are left out. A field on which the runs
            differ reads "mixed: a, b".
    """
    runs = list(runs)

    def values(key: str) -> list[Any]:
        return sorted({r[key] for r in runs if r.get(key) is not None})

    parts = []
    for key, one, many, show in (
        ("dataset", "{}", "datasets mixed: {}", str),
        ("delta", "δ = {}", "δ mixed: {}", delta_text),
        ("rounds", "{} rounds", "rounds mixed: {}", str),
        ("accountant", "{}", "accountants mixed: {}", str),
    ):
        found = values(key)
        if len(found) == 1:
            parts.append(one.format(show(found[0])))
        elif found:
            parts.append(many.format(", ".join(show(v) for v in found)))
    return " · ".join(parts)

"""The compare page's figure: final test accuracy against ε, one curve per algorithm (and series).

A point is in its dataset's headline metric (``metric``: `dpfl.data.headline_metric`), accuracy
unless the dataset's papers report another: Creditcard's 0.17 % frauds make a constant classifier
0.998 accurate, so its points are balanced accuracy. The y axis title names the metric, and each
metric with its datasets when the points mix them.

Every trace carries ``meta = {"role": …, "algorithm": …}`` with role ``mean``, ``band``, ``run``
(each run of a point, when asked for), ``pareto`` or ``missed`` (from each ε target a point
missed to the ε it spent) (and ``series``, ``notion`` on mean and band, ``metric``, its name, on
mean); points carry
``customdata = [algorithm, epsilon, run_ids]``, so the browser maps a click back to the runs
behind it (the seeds) without parsing hover text. Runs of different privacy notions are drawn in
one panel per notion (``dpfl.plots.notions``).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import plotly.graph_objects as go
from scipy import stats

from dpfl.metrics import METRIC_NAMES
from dpfl.plots.baseline import no_better_than_guessing
from dpfl.plots.colours import FAINT_GREY, _translucent, algorithm_colour
from dpfl.plots.layout import _DASHES, _epsilon_axis, _floats, _no_data
from dpfl.plots.notions import epsilon_title, faceted_figure, notions_in

__all__ = ["BANDS", "Band", "band_limits", "metric_title", "tradeoff"]

Band = Literal["std", "se", "ci95", "minmax"]
BANDS: dict[str, str] = {
    "std": "± 1 std",
    "se": "± 1 standard error",
    "ci95": "95 % CI of the mean",
    "minmax": "min–max",
}
"""The bands a mean can carry, as the legend and hover name them."""

_BAND_ALPHA = 0.18
_FRONTIER_COLOUR = "#8c8c8c"  # light: a guide under the series, not a series of its own
_GUESSING_SYMBOL = "x"
_NOT_GUARANTEED_DASH = "dot"
_GUARANTEED_DASHES = tuple(d for d in _DASHES if d != _NOT_GUARANTEED_DASH)

Point = Mapping[str, Any]


def tradeoff(
    points: Sequence[Point],
    *,
    reference: Point | Sequence[Point] | None = None,
    pareto: Sequence[Point] | None = None,
    baselines: Sequence[Point] | None = None,
    no_frontier: Mapping[str, str] | None = None,
    band: Band = "std",
    individual: bool = False,
    log_x: bool = True,
    title: str | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """Returns final accuracy (or each point's ``metric``) against ε: a line and a ±1 std band per
    series, one panel per notion.

    Args:
        points: one per (series, ε) cell, aggregated over seeds:
            ``{"algorithm": str, "epsilon": float, "mean": float, "std": float | None, "n": int}``.
            ``std`` is None when fewer than two seeds finished; the band then has no width there.
            Optional keys: ``notion`` (record, user, …; points of different notions go to
            different panels), ``delta`` (named on the ε axis), ``series`` (the legend name
            when one algorithm has several lines, e.g. "uldp_avg · sweep b"; default the
            algorithm), ``run_ids`` (the runs behind the point, in its customdata) and
            ``baseline`` (``{"accuracy", "records"}``, the majority-class rate of its evaluation
            set in its metric, `chance_baseline`: a point within ``guessing_margin`` of it is
            drawn as an × and its hover says "no better than guessing"), ``metric`` (the test
            metric ``mean`` is in, `dpfl.metrics.HEADLINE_METRICS`; default accuracy) and
            ``datasets`` (its runs' datasets, named on the y axis when metrics mix).
        reference: the non-private result(s), ``{"algorithm", "mean", "std", "n"}`` (optional
            ``metric``, ``datasets``) or a list of them, each drawn as a dashed horizontal line
            across every panel.
        pareto: the frontier points ``{"algorithm", "epsilon", "mean"}`` (optional ``notion``,
            ``run_ids``), in any order; one frontier per panel.
        baselines: majority-class lines ``{"accuracy": float, "label": str | None}``, dotted
            across every panel and labelled "not private" (the rate reads the evaluation labels).
        no_frontier: why a notion's panel has no frontier, written in that panel (e.g. its runs
            are on several datasets, whose accuracies a frontier must not rank together).
        band: the band around each mean (`BANDS`, `band_limits`).
        individual: draw each run of a point too (from the points' ``members``).
        log_x: draw ε on a log axis (sweeps usually span ε = 0.1 … 10).
        title: the figure's title; default "Final test accuracy against ε", naming the points'
            metric(s).
        subtitle: the title's second line (datasets, δ, rounds, accountants).

    Raises:
        ValueError: if `log_x` and a point has ε ≤ 0 or not finite, which a log axis cannot show.
    """
    references = [reference] if isinstance(reference, Mapping) else list(reference or ())
    if log_x:
        _check_log_epsilons([*points, *(pareto or ())])
    panels = notions_in(p.get("notion") for p in points) or [None]
    metrics = sorted({_metric(p) for p in [*points, *references]}) or ["accuracy"]
    fig = faceted_figure(
        kind="tradeoff",
        title=title or f"Final test {' and '.join(_metric_name(m) for m in metrics)} against ε",
        subtitle=subtitle,
        notions=panels,
        yaxis={"title": {"text": metric_title([*points, *references])}, "range": [0, 1]},
    )
    dashes: dict[str, itertools.cycle[str]] = {}
    any_missed = False
    for col, notion in enumerate(panels, start=1):
        mine = [p for p in points if p.get("notion") == notion]
        fig.update_xaxes(
            _epsilon_axis(
                epsilon_title(notion, (p.get("delta") for p in mine), log=log_x),
                [*(p["epsilon"] for p in mine), *(p["target_epsilon"] for p in mine if _missed(p))],
                log=log_x,
            ),
            row=1,
            col=col,
        )
        for series in sorted({_series(p) for p in mine}):
            cells = sorted((p for p in mine if _series(p) == series), key=lambda p: p["epsilon"])
            # dotted is kept for a series whose ledger does not cover every release (not guaranteed)
            if all(c.get("not_guaranteed") for c in cells):
                dash = _NOT_GUARANTEED_DASH
            else:
                dash = next(dashes.setdefault(cells[0]["algorithm"], itertools.cycle(_GUARANTEED_DASHES)))
            area = _band(series, notion, cells, band)
            if area is not None:
                fig.add_trace(area, row=1, col=col)  # before its line, so the line is drawn on top
            if individual:
                fig.add_trace(_runs(series, notion, cells), row=1, col=col)
            fig.add_trace(_mean_line(series, notion, cells, dash), row=1, col=col)
        missed = [p for p in mine if _missed(p)]
        if missed:
            fig.add_trace(_targets(notion, missed, first=not any_missed), row=1, col=col)
            any_missed = True
        frontier = [c for c in pareto or () if c.get("notion") == notion]
        if frontier:
            fig.add_trace(_frontier(frontier, first=col == 1), row=1, col=col)
        elif notion in (no_frontier or {}):
            suffix = "" if col == 1 else str(col)
            fig.add_annotation(
                text=f"no Pareto frontier: {no_frontier[notion]}",
                name="no-frontier",
                xref=f"x{suffix} domain",
                yref=f"y{suffix} domain",
                x=0.02,
                y=0.02,
                xanchor="left",
                yanchor="bottom",
                showarrow=False,
                font={"color": FAINT_GREY},
            )
    for ref in references:
        _add_reference(fig, ref, _columns(panels, ref))
    for line in baselines or ():
        _add_baseline(fig, line, _columns(panels, line))
    if not points:
        # finished non-private runs are the dashed lines: what is missing is a private one
        _no_data(fig, "no private run has finished yet" if references else "no finished runs yet")
    return fig


def _series(point: Point) -> str:
    return point.get("series") or point["algorithm"]


def _metric(point: Point) -> str:
    return point.get("metric") or "accuracy"


def _metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric.replace("_", " "))


def metric_title(points: Iterable[Point]) -> str:
    """Returns the y axis title: the test metric of `points` ("test balanced accuracy"), or, when
    they are in several, each metric with its points' ``datasets``: "test accuracy (mnist) ·
    balanced accuracy (creditcard)"; "test accuracy" for no points."""
    datasets: dict[str, set[str]] = defaultdict(set)
    for p in points:
        datasets[_metric(p)].update(p.get("datasets") or ())
    if len(datasets) <= 1:
        return f"test {_metric_name(next(iter(datasets), 'accuracy'))}"
    named = (
        _metric_name(m) + (f" ({', '.join(sorted(names))})" if names else "")
        for m, names in sorted(datasets.items())
    )
    return "test " + " · ".join(named)


def _check_log_epsilons(points: Sequence[Point]) -> None:
    """Raises ValueError naming the first point a log ε axis cannot place."""
    for p in points:
        eps = p["epsilon"]
        if eps is None or not (math.isfinite(eps) and eps > 0):
            raise ValueError(
                f"`epsilon` of {p['algorithm']!r} must be a finite number > 0 on a log ε axis; got {eps}. "
                "Pass a non-private result as `reference`, or use log_x=False."
            )


def band_limits(point: Point, band: Band) -> tuple[float, float]:
    """Returns (low, high) of the `band` around a point's mean, from its ``std`` and ``n`` (its
    runs' sample std and count) or its ``members`` (``[run_id, ε, accuracy]``, for min–max); the
    mean itself when one run leaves no spread.

    std: mean ± s; se: mean ± s/√n; ci95: mean ± t(0.975, n − 1)·s/√n (Student's t, the interval
    that covers the true mean of normal runs 95 % of the time); minmax: the runs' extremes.
    """
    mean, std, n = point["mean"], point.get("std"), int(point.get("n") or 1)
    if band == "minmax":
        values = [m[2] for m in point.get("members") or ()]
        return (min(values), max(values)) if values else (mean, mean)
    if std is None or n < 2:
        return mean, mean
    error = std / math.sqrt(n)
    half = {"std": std, "se": error, "ci95": stats.t.ppf(0.975, n - 1) * error}[band]
    return mean - float(half), mean + float(half)


def _band(series: str, notion: str | None, cells: Sequence[Point], band: Band = "std") -> go.Scatter | None:
    """Returns the filled `band` area (`band_limits`) of one series, or None if no cell has a spread.

    One closed polygon (upper edge left to right, lower edge back) rather than two traces joined
    by ``fill="tonexty"``, which would depend on the order of every other trace in the figure.
    """
    limits = [band_limits(c, band) for c in cells]
    if all(low == high for low, high in limits):
        return None
    algorithm = cells[0]["algorithm"]
    eps = _floats(c["epsilon"] for c in cells)
    upper = [high for _, high in limits]
    lower = [low for low, _ in limits]
    return go.Scatter(
        x=eps + eps[::-1],
        y=_floats(upper + lower[::-1]),
        mode="lines",
        fill="toself",
        fillcolor=_translucent(algorithm_colour(algorithm), _BAND_ALPHA),
        line={"width": 0},
        name=f"{series} {BANDS[band]}",
        legendgroup=series,
        showlegend=False,
        hoverinfo="skip",
        meta={"role": "band", "algorithm": algorithm, "series": series, "notion": notion, "band": band},
    )


def _runs(series: str, notion: str | None, cells: Sequence[Point]) -> go.Scatter:
    """Returns every run of one series as a small translucent point at its own ε spent."""
    members = [(c, m) for c in cells for m in c.get("members") or ()]
    algorithm = cells[0]["algorithm"]
    return go.Scatter(
        x=_floats(m[1] if m[1] is not None else c["epsilon"] for c, m in members),
        y=_floats(m[2] for _, m in members),
        mode="markers",
        marker={"color": _translucent(algorithm_colour(algorithm), 0.55), "size": 6},
        name=f"{series}: each run",
        legendgroup=series,
        showlegend=False,
        customdata=[[algorithm, c["epsilon"], [m[0]]] for c, m in members],
        hovertext=[
            f"{series}<br>run {m[0][:8]}: {_metric_name(_metric(c))} {m[2]:.3f} at ε {m[1]:.3g}"
            for c, m in members
        ],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={"role": "run", "algorithm": algorithm, "series": series, "notion": notion},
    )


def _mean_line(series: str, notion: str | None, cells: Sequence[Point], dash: str) -> go.Scatter:
    """Returns one series' mean accuracy against ε, one marker per cell (× if no better than guessing).

    Lines and markers both, so a series of a single cell still shows as a marker.
    """
    algorithm = cells[0]["algorithm"]
    guessing = [bool(no_better_than_guessing(c["mean"], c.get("baseline"))) for c in cells]
    uncovered = [bool(c.get("not_guaranteed")) for c in cells]
    # a protected run's ε bounds its data's budget; a simulation's describes a mechanism whose
    # noise anyone with the spec can replay: diamonds and circles tell them apart
    shape = "diamond" if all(c.get("protected") for c in cells) else "circle"
    symbols = [_GUESSING_SYMBOL if g else shape for g in guessing]
    return go.Scatter(
        x=_floats(c["epsilon"] for c in cells),
        y=_floats(c["mean"] for c in cells),
        mode="lines+markers",
        line={"color": algorithm_colour(algorithm), "width": 2, "dash": dash},
        marker={
            "size": [10 if g else 7 for g in guessing],
            # hollow where the ledger does not cover every release: its ε is not a guarantee
            "symbol": [f"{s}-open" if u else s for s, u in zip(symbols, uncovered, strict=True)],
        },
        name=f"{series} (not guaranteed)" if all(uncovered) else series,
        legendgroup=series,
        customdata=[_customdata(c) for c in cells],
        hovertext=[_cell_text(c) for c in cells],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={
            "role": "mean",
            "algorithm": algorithm,
            "series": series,
            "notion": notion,
            "metric": _metric_name(_metric(cells[0])),
        },
    )


def _customdata(cell: Point) -> list[Any]:
    """Returns what a click on `cell` needs: ``[algorithm, epsilon, run_ids]``."""
    return [cell["algorithm"], float(cell["epsilon"]), list(cell.get("run_ids") or ())]


def _cell_text(cell: Point) -> str:
    """Returns the hover text of one result: series, ε (or "non-private"), mean ± std, seeds, guessing."""
    eps = cell.get("epsilon")
    privacy = "non-private" if eps is None else f"ε = {eps:.3g}"
    std = cell.get("std")
    spread = "" if std is None else f" ± {std:.3f}"
    n = cell.get("n")
    seeds = "" if n is None else f"<br>{n} seed{'s' if n != 1 else ''}"
    if _missed(cell):
        privacy += f" spent (target {cell['target_epsilon']:.3g}: missed)"
    metric = _metric_name(_metric(cell))
    text = f"<b>{_series(cell)}</b><br>{privacy}<br>{metric} {cell['mean']:.3f}{spread}{seeds}"
    if cell.get("not_guaranteed"):
        text += "<br>not guaranteed: " + "; ".join(cell["not_guaranteed"])
    if "protected" in cell:  # private points say what their ε is worth
        text += (
            "<br>protected: charged to its data's budget, noise from a secret key"
            if cell["protected"]
            else "<br>simulation: its noise can be replayed from the spec"
        )
    baseline = cell.get("baseline")
    if eps is not None and no_better_than_guessing(cell["mean"], baseline):
        text += f"<br>no better than guessing: majority class {baseline['accuracy']:.3f} (not private)"
    return text


def _missed(cell: Point) -> bool:
    """Returns whether a point's runs spent more than their ε target (a paper calibration can)."""
    eps, target = cell.get("epsilon"), cell.get("target_epsilon")
    return eps is not None and target is not None and eps > target * (1 + 1e-6)


def _targets(notion: str | None, cells: Sequence[Point], *, first: bool) -> go.Scatter:
    """Returns one panel's missed targets: from each target ε (a tick) a dotted line to the ε its
    point spent, at its accuracy, so an under-protecting calibration shows without a hover."""
    x: list[float | None] = []
    y: list[float | None] = []
    sizes: list[int] = []
    for c in cells:
        x += [float(c["target_epsilon"]), float(c["epsilon"]), None]
        y += [float(c["mean"]), float(c["mean"]), None]
        sizes += [14, 0, 0]
    return go.Scatter(
        x=x,
        y=y,
        mode="lines+markers",
        line={"color": FAINT_GREY, "width": 1, "dash": "dot"},
        marker={"symbol": "line-ns-open", "size": sizes, "color": FAINT_GREY, "line": {"width": 1.5}},
        name="ε target, missed",
        legendgroup="missed",
        showlegend=first,
        hovertext=[
            f"{_series(c)}: target ε {c['target_epsilon']:.3g}, spent {c['epsilon']:.3g}"
            for c in cells
            for _ in range(3)
        ],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={"role": "missed", "notion": notion},
    )


def _columns(panels: Sequence[str | None], line: Point) -> list[int]:
    """Returns the panels (1-based columns) a reference line belongs in: those of the notions its
    dataset's runs were drawn in (`line["notions"]`), or every panel when it does not say."""
    notions = line.get("notions")
    return [col for col, notion in enumerate(panels, start=1) if notions is None or notion in notions]


def _add_reference(fig: go.Figure, ref: Point, columns: Sequence[int]) -> None:
    """Adds a non-private result as a dashed line (and its ± std band) across its panels.

    A layout shape in axis-domain coordinates, not a trace: it spans the plot whatever the ε range
    and does not widen it. The label is written on its first panel only.
    """
    colour = algorithm_colour(ref["algorithm"])
    name = f"non-private {_series(ref)}"
    std = ref.get("std")
    for col in columns:
        if std is not None:
            fig.add_hrect(
                y0=ref["mean"] - std,
                y1=ref["mean"] + std,
                fillcolor=colour,
                opacity=0.1,
                line_width=0,
                layer="below",
                legendgroup=name,
                row=1,
                col=col,
            )
        label = (
            {
                "annotation_text": f"{name}: {ref['mean']:.3g}",
                "annotation_position": "top left",
                "annotation_font_color": colour,
                "annotation_hovertext": _cell_text({**ref, "epsilon": None}),
            }
            if col == columns[0]
            else {}
        )
        fig.add_hline(
            y=float(ref["mean"]),
            line={"color": colour, "dash": "dash", "width": 2},
            name=name,
            legendgroup=name,
            showlegend=col == columns[0],
            row=1,
            col=col,
            **label,
        )


def _add_baseline(fig: go.Figure, line: Point, columns: Sequence[int]) -> None:
    """Adds a majority-class accuracy as a dotted grey line across its panels, labelled not private."""
    where = f", {line['label']}" if line.get("label") else ""
    name = f"majority class{where} (not private)"
    for col in columns:
        label = (
            {
                "annotation_text": f"majority class{where}: {line['accuracy']:.3g} (not private)",
                "annotation_position": "bottom right",
                "annotation_font_color": FAINT_GREY,
            }
            if col == columns[0]
            else {}
        )
        fig.add_hline(
            y=float(line["accuracy"]),
            line={"color": FAINT_GREY, "dash": "dot", "width": 1.5},
            name=name,
            legendgroup=name,
            showlegend=col == columns[0],
            row=1,
            col=col,
            **label,
        )


def _frontier(pareto: Sequence[Point], *, first: bool) -> go.Scatter:
    """Returns one panel's Pareto frontier as a staircase with a ring on each frontier point.

    The step is horizontal first (``hv``): between two frontier points the best accuracy known for
    a budget is the one of the cheaper point, until the next point is affordable.
    """
    cells = sorted(pareto, key=lambda p: (p["epsilon"], p["mean"]))
    return go.Scatter(
        x=_floats(c["epsilon"] for c in cells),
        y=_floats(c["mean"] for c in cells),
        mode="lines+markers",
        line={"color": _FRONTIER_COLOUR, "width": 1.5, "shape": "hv"},
        marker={"symbol": "circle-open", "size": 12, "color": _FRONTIER_COLOUR, "line": {"width": 1.5}},
        name="Pareto frontier",
        legendgroup="pareto",
        showlegend=first,
        customdata=[_customdata(c) for c in cells],
        hovertext=[f"Pareto frontier<br>{_cell_text(c)}" for c in cells],
        hovertemplate="%{hovertext}<extra></extra>",
        meta={"role": "pareto", "notion": cells[0].get("notion")},
    )

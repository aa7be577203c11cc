"""The reproduction's outputs: `summary.csv` and a self-contained `report.html`.

The HTML holds plotly.js inline once and every figure as JSON, so it opens offline and can be
mailed as one file. Figures come from `dpfl.plots.tradeoff`, the function the dashboard's
Compare page uses, with the paper's numbers added as crosses in each method's colour. Every
piece of text that comes from a config or a run is escaped.
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.offline import get_plotlyjs

from dpfl.formats import cell_text
from dpfl.plots import algorithm_colour, tradeoff
from dpfl.reproduce.calibration import PaperCalibration
from dpfl.reproduce.manifest import SENSITIVITY, PaperInfo, Setting, Sweep
from dpfl.reproduce.summary import Outcome, Sensitivity, Verdict, row_name, variant_label

__all__ = ["CSV_COLUMNS", "Report", "figure", "machine", "write_csv", "write_html"]

CSV_COLUMNS = (
    "setting",
    "variant",
    "algorithm",
    "x",
    "n",
    "failed",
    "accuracy_mean",
    "accuracy_std",
    "loss_mean",
    "loss_std",
    "epsilon_mean",
    "epsilon_max",
    "target_epsilon",
    "paper_metric",
    "paper_value",
    "ours",
    "paper_epsilon",
    "paper_source",
    "tuned",
    "role",
    "candidate",
    "sigma",
)
_FIGURE_HEIGHT = "460px"
_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.25rem; margin-top: 2.5rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: right; }
th { background: #f5f5f5; } td.name, th.name { text-align: left; }
.holds { color: #007a3d; font-weight: 600; } .does-not-hold { color: #b00020; font-weight: 600; }
.cannot-be-checked { color: #8a6d00; font-weight: 600; }
.meta { color: #555; } .warn { color: #b00020; } code { background: #f3f3f3; padding: 0 .2rem; }
"""


@dataclass
class Report:
    """Everything the HTML page shows."""

    paper: PaperInfo
    settings: Sequence[Setting]
    sweeps: Sequence[Sweep]
    outcomes: Sequence[Outcome]
    rows: Sequence[Mapping[str, Any]]
    verdicts: Sequence[Verdict]
    corrections: Sequence[str]
    calibrations: Sequence[PaperCalibration]  # the ledger ε of each method's paper σ
    unprojected: Sequence[str]  # cells whose paper σ could not be accounted, and why
    quick: bool
    started: dt.datetime
    wall_s: float
    where: str  # "local", or the URL of the server that ran the sweeps
    links: dict[str, str] = field(default_factory=dict)  # setting → the sweep on the dashboard
    sensitivity: Sequence[Sensitivity] = ()  # the verdicts with each candidate standing in
    left_out: Mapping[str, str] = field(
        default_factory=dict
    )  # settings not run (by --quick, no data), and why


def machine() -> dict[str, str]:
    """Returns what the runs ran on: host, OS, CPUs, Python and torch (with its thread count)."""
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "torch": f"{torch.__version__} ({torch.get_num_threads()} threads)",
    }


def write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Writes the summary rows, one line per cell, as every CSV export writes its cells
    (`dpfl.formats.cell_text`: empty for None, floats at full precision)."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: cell_text(row.get(k)) for k in CSV_COLUMNS})


def figure(setting: Setting, variant: str, rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Returns final test accuracy against the setting's x, one curve per method, paper values as ×."""
    block = setting.block
    mine = [
        r
        for r in rows
        if r["setting"] == setting.name and r["variant"] == variant and r["role"] != SENSITIVITY
    ]
    cells = [r for r in mine if r["x"] is not None and r["accuracy_mean"] is not None and not r["role"]]
    points = [
        {
            "algorithm": r["algorithm"],
            "epsilon": r["x"],
            "mean": r["accuracy_mean"],
            "std": r["accuracy_std"],
            "n": r["n"],
        }
        for r in cells
    ]
    reference = [
        {"algorithm": row_name(r), "mean": r["accuracy_mean"], "std": r["accuracy_std"], "n": r["n"]}
        for r in mine
        if r["x"] is None and r["accuracy_mean"] is not None
    ]
    is_epsilon = block.x == "privacy.epsilon"
    log_x = is_epsilon and all(p["epsilon"] > 0 for p in points)
    title = block.title + (f" ({variant})" if variant else "")
    fig = tradeoff(points, reference=reference, log_x=log_x, title=title)
    if not is_epsilon:
        fig.update_xaxes(title_text=block.x)
    for algorithm in dict.fromkeys(p.algorithm for p in block.paper):
        marks = [
            (p.x, p.value if p.metric == "accuracy" else 1 - p.value, p.source)
            for p in block.paper
            if p.algorithm == algorithm
            and p.x is not None
            and p.metric != "loss"
            and all(f"{k}={v}" in variant.split(", ") for k, v in p.where.items())
        ]
        if marks:
            fig.add_trace(
                go.Scatter(
                    x=[float(m[0]) for m in marks],
                    y=[float(m[1]) for m in marks],
                    mode="markers",
                    marker={"symbol": "x", "size": 11, "color": algorithm_colour(algorithm)},
                    name=f"paper: {algorithm}",
                    legendgroup=algorithm,
                    hovertext=[f"paper, {algorithm}: accuracy {m[1]:.3f} ({m[2]})" for m in marks],
                    hovertemplate="%{hovertext}<extra></extra>",
                    meta={"role": "paper", "algorithm": algorithm},
                )
            )
    return fig


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}g}"


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.4f}" + ("" if std is None else f" ± {std:.4f}")


def _paper_cell(row: Mapping[str, Any]) -> str:
    if row["paper_value"] is None:
        return "–"
    metric = str(row["paper_metric"]).replace("_", " ")
    return f"{_e(metric)} {row['paper_value']:.4g}<br><small>{_e(row['paper_source'])}</small>"


def _table(setting: Setting, variant: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """Returns the setting's rows as a table; the paper's columns only when it gives numbers."""
    by_epsilon, has_paper = setting.block.x == "privacy.epsilon", bool(setting.block.paper)
    head = ["method", *([] if by_epsilon else [setting.block.x]), "ε target", "runs", "test accuracy"]
    head += ["test loss", "ε spent (mean / max)"]
    if has_paper:
        head += ["paper", "ours in the paper's metric", "ε the paper states"]
    cells = [f"<th{' class=name' if i == 0 else ''}>{_e(h)}</th>" for i, h in enumerate(head)]
    body = [f"<tr>{''.join(cells)}</tr>"]
    for r in rows:
        if r["setting"] != setting.name or r["variant"] != variant:
            continue
        runs = f"{r['n']}" + (f" <span class=warn>({r['failed']} failed)</span>" if r["failed"] else "")
        spent = (
            "not private"
            if r["epsilon_mean"] is None
            else f"{_num(r['epsilon_mean'])} / {_num(r['epsilon_max'])}"
        )
        tuned = "" if r.get("tuned") is None else f" <small>(tuned: {_e(r['tuned'])})</small>"
        line = [f"<td class=name>{_e(row_name(r))}{tuned}</td>"]
        if not by_epsilon:
            line.append(f"<td>{_num(r['x'])}</td>")
        line += [f"<td>{_num(r['target_epsilon'])}</td>", f"<td>{runs}</td>"]
        line += [
            f"<td>{_pm(r['accuracy_mean'], r['accuracy_std'])}</td>",
            f"<td>{_pm(r['loss_mean'], r['loss_std'])}</td>",
        ]
        line.append(f"<td>{spent}</td>")
        if has_paper:
            line += [
                f"<td>{_paper_cell(r)}</td>",
                f"<td>{_num(r['ours'])}</td>",
                f"<td>{_num(r['paper_epsilon'])}</td>",
            ]
        body.append(f"<tr>{''.join(line)}</tr>")
    return f"<table>{''.join(body)}</table>"


def _verdicts(setting: Setting, variant: str, verdicts: Sequence[Verdict]) -> str:
    items = [
        f'<li><span class="{v.verdict.replace(" ", "-")}">{_e(v.verdict)}</span>: {_e(v.claim.text)} '
        f"<br><small>{_e(v.detail)}</small></li>"
        for v in verdicts
        if v.setting == setting.name and variant_label(v.variant) == variant
    ]
    return f"<h3>The paper's claims</h3><ul>{''.join(items)}</ul>" if items else ""


def _sweep_text(setting: Setting, sweep: Sweep) -> str:
    grid = "; ".join(
        f"<code>{_e(k)}</code> ∈ {{{_e(', '.join(str(v) for v in vs))}}}" for k, vs in sweep.grid.items()
    )
    rounds = sweep.base.get("rounds", 20)
    return (
        f"<p class=meta>Config <code>{_e(setting.path.name)}</code>: {len(sweep.points)} runs of "
        f"{_e(rounds)} rounds; grid {grid}.</p>"
    )


def _setting_html(setting: Setting, sweep: Sweep, report: Report) -> str:
    parts = [f"<h2>{_e(setting.block.title)}</h2>"]
    if setting.block.notes:
        parts.append(f"<p>{_e(setting.block.notes)}</p>")
    parts.append(_sweep_text(setting, sweep))
    if setting.name in report.links:
        link = report.links[setting.name]
        parts.append(f'<p class=meta>On the dashboard: <a href="{_e(link)}">{_e(link)}</a></p>')
    variants = list(dict.fromkeys(r["variant"] for r in report.rows if r["setting"] == setting.name)) or [""]
    for i, variant in enumerate(variants):
        if variant:
            parts.append(f"<h3>{_e(variant)}</h3>")
        fig = figure(setting, variant, report.rows)
        div = pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=False,
            div_id=f"fig-{setting.name}-{i}",
            default_height=_FIGURE_HEIGHT,
            config={"displaylogo": False},
        )
        parts += [div, _verdicts(setting, variant, report.verdicts), _table(setting, variant, report.rows)]
    return "\n".join(parts)


def _privacy_html(report: Report) -> str:
    parts = ["<h2>Privacy corrections</h2>"]
    if report.calibrations:
        items = "".join(
            f"<li{' class=warn' if c.under_protects else ''}>{_e(c.line())}</li>" for c in report.calibrations
        )
        parts.append(
            "<p>The paper's own noise calibration (<code>calibration: paper</code>) in each setting as "
            "configured here, accounted by the ledger (add/remove one record) without running; a "
            "setting that differs from the paper's own is not what the paper's runs spent:</p>"
            f"<ul>{items}</ul>"
        )
    if report.unprojected:
        items = "".join(f"<li>{_e(line)}</li>" for line in report.unprojected)
        parts.append(f"<p class=warn>The paper's calibration could not be accounted for:</p><ul>{items}</ul>")
    if report.corrections:
        items = "".join(f"<li>{_e(line)}</li>" for line in report.corrections)
        parts.append(
            "<p class=warn>The stated ε of these runs does not cover all they released: the ledger's ε "
            "is above it, or something was computed from private data that no ε covers (each line "
            f"says which):</p><ul>{items}</ul>"
        )
    else:
        parts.append(
            "<p>No run's ledger ε (recomputed from what it released) exceeds the ε it targets; "
            "the table shows both.</p>"
        )
    return "".join(parts)


def _failures_html(outcomes: Sequence[Outcome]) -> str:
    failed = [o for o in outcomes if o.status != "succeeded"]
    if not failed:
        return ""
    items = "".join(f"<li>{_e(o.label)}: {_e(o.status)}: {_e(o.error or '')}</li>" for o in failed)
    return f"<h2 class=warn>Failed runs ({len(failed)})</h2><ul>{items}</ul>"


def write_html(report: Report, path: Path) -> None:
    """Writes the self-contained report page (plotly.js inline once, figures as JSON)."""
    paper = report.paper
    env = machine()
    mode = "quick (reduced rounds, grid and seeds)" if report.quick else "full"
    where = "this machine" if report.where == "local" else f"the server at {report.where}"
    runs_s = sum(o.duration_s or 0.0 for o in report.outcomes)
    meta = (
        f"<p class=meta>{_e(mode)} reproduction, {len(report.outcomes)} runs on {_e(where)}; started "
        f"{_e(report.started.isoformat(timespec='seconds'))}; wall time {report.wall_s:.0f} s "
        f"(runs {runs_s:.0f} s). Machine: {_e(', '.join(f'{k} {v}' for k, v in env.items()))}.</p>"
    )
    meta += "".join(
        f"<p class=meta>Left out: {_e(name)} ({_e(why)}).</p>" for name, why in report.left_out.items()
    )
    sections = [
        _setting_html(setting, sweep, report)
        for setting, sweep in zip(report.settings, report.sweeps, strict=True)
    ]
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Reproduction of seed {_e(paper.seed)}: {_e(paper.key)}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>
<h1>Reproduction: {_e(paper.citation)} (seed {_e(paper.seed)})</h1>
{meta}
<p>Accuracy is final test accuracy (mean ± sample std over seeds); ε spent is what each run's ledger adds
up to under its accountant, next to the ε the paper states. Crosses in the figures are the paper's
numbers. The same rows are in <code>summary.csv</code>.</p>
{"".join(sections)}
{_privacy_html(report)}
{_failures_html(report.outcomes)}
</body></html>
"""
    path.write_text(page, encoding="utf-8")

"""A reproduction as a Markdown section: the shape every paper has in docs/reproduction.md.

One section per paper, in this order: how it was run; per setting its notes, the sweep, a table
of test accuracy ± std / test loss per method (rows) and x (columns), the paper's numbers next
to ours, and the verdict on each claim; then the privacy corrections (what the paper's own
calibration really spends, and any run whose ledger exceeds its stated ε) and failed runs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dpfl.formats import number_text
from dpfl.reproduce.calibration import PaperCalibration
from dpfl.reproduce.manifest import CEILING, Setting, Sweep
from dpfl.reproduce.report import Report
from dpfl.reproduce.summary import HOLDS, Verdict, variant_label
from dpfl.sweep import PER_ALGORITHM

__all__ = ["X_SYMBOLS", "markdown", "splice"]

X_SYMBOLS = {"privacy.epsilon": "ε", "privacy.mu": "μ", "privacy.noise_multiplier": "σ"}


def splice(document: str, paper: str, section: str) -> str:
    """Returns `document` with the paper's generated section replaced by `section`.

    The section sits between ``<!-- dpfl reproduce PAPER: begin -->`` and its ``end`` marker, so
    the hand-written text around it survives a regeneration; without markers it is appended.
    """
    begin, end = f"<!-- dpfl reproduce {paper}: begin -->", f"<!-- dpfl reproduce {paper}: end -->"
    block = f"{begin}\n{section.rstrip()}\n{end}"
    head, found, rest = document.partition(begin)
    if not found:
        return document.rstrip("\n") + "\n\n" + block + "\n"
    _, closed, tail = rest.partition(end)
    if not closed:
        raise ValueError(f"`{begin}` has no `{end}` after it")
    return head + block + tail


def markdown(report: Report) -> str:
    """Returns the paper's section (see the module docstring), ending in a newline."""
    paper, runs = report.paper, len(report.outcomes)
    seeds = sorted({o.seed for o in report.outcomes})
    mode = "the reduced sweep" if report.quick else "the full sweep"
    where = "here" if report.where == "local" else f"on the server at {report.where}"
    lines = [
        f"## Seed {paper.seed}: {paper.citation}",
        "",
        f"`dpfl reproduce {paper.key}{' --quick' if report.quick else ''}` ({mode}): {runs} runs {where}, "
        f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} per cell, wall time {report.wall_s:.0f} s; "
        f"{report.started:%Y-%m-%d}.",
        "",
    ]
    lines += [f"Left out: `{name}` ({why})." for name, why in report.left_out.items()]
    lines += [""] if report.left_out else []
    lines += _robustness(report.verdicts)
    for setting, sweep in zip(report.settings, report.sweeps, strict=True):
        lines += _setting(setting, sweep, report)
    lines += _privacy(report)
    failed = [o for o in report.outcomes if o.status != "succeeded"]
    if failed:
        lines += [f"### Failed runs ({len(failed)})", ""]
        lines += [f"- {o.label}: {o.status}: {(o.error or '').partition(chr(10))[0]}" for o in failed]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _robustness(verdicts: Sequence[Verdict]) -> list[str]:
    """Returns each claim's verdicts across the readings (settings and variants) it was checked in."""
    by_claim: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_claim.setdefault(v.claim.text, []).append(v)
    if not any(len(vs) > 1 for vs in by_claim.values()):
        return []
    out = ["Each claim across the readings it was checked in (a setting, and a variant of it):", ""]
    for text, vs in by_claim.items():
        held = [v for v in vs if v.verdict == HOLDS]
        where = "; ".join(
            f"{v.verdict} in {v.setting}" + (f" ({variant_label(v.variant)})" if v.variant else "")
            for v in vs
        )
        out.append(f"- *{text}*: holds in {len(held)} of {len(vs)} readings ({where}).")
    return [*out, ""]


def _x_name(x: str) -> str:
    return X_SYMBOLS.get(x, f"`{x}`")


def _cell(row: Mapping[str, Any], *, spent: bool) -> str:
    if row["accuracy_mean"] is None:
        return "failed" if row["failed"] else "–"
    text = f"{100 * row['accuracy_mean']:.2f}"
    if row["accuracy_std"] is not None:
        text += f" ± {100 * row['accuracy_std']:.2f}"
    if row["loss_mean"] is not None:
        text += f" / {row['loss_mean']:.4f}"
    if spent and row["epsilon_max"] is not None:
        text += f" (ε {row['epsilon_max']:.4g})"
    return text


def _setting(setting: Setting, sweep: Sweep, report: Report) -> list[str]:
    block = setting.block
    grid = "; ".join(f"`{k}` ∈ {{{', '.join(str(v) for v in vs)}}}" for k, vs in sweep.grid.items())
    lines = [f"### {block.title}", ""]
    if block.notes:
        lines += [block.notes, ""]
    rounds = sorted({p.data.get("rounds", 20) for p in sweep.points})  # a candidate may set its own
    span = f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}"
    lines += [
        f"Config `configs/paper/{setting.path.name}`: {len(sweep.points)} runs of {span} rounds; "
        f"grid {grid}.",
        "",
    ]
    if setting.name in report.links:
        lines += [f"On the dashboard: {report.links[setting.name]}", ""]
    mine = [r for r in report.rows if r["setting"] == setting.name]
    for variant in dict.fromkeys(r["variant"] for r in mine):
        rows = [r for r in mine if r["variant"] == variant]
        if variant:
            lines += [f"#### {variant}", ""]
        lines += _table(block.x, rows)
        lines += _parameters(sweep, block.x, rows)
        lines += _tuned(block.x, rows)
        lines += _paper_numbers(block.x, rows)
        lines += _claims(setting, variant, report)
        lines += _sensitivity(setting, variant, report)
    return lines


def _table(x_key: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Returns the pivot table: one line per method, one column per x; non-private rows repeat;
    the ceiling, when run, in a last column."""
    by_epsilon = x_key == "privacy.epsilon"
    ceilings = {r["algorithm"]: r for r in rows if r["role"] == CEILING}
    rows = [r for r in rows if not r["role"]]
    xs = sorted({r["x"] for r in rows if r["x"] is not None})
    methods = list(dict.fromkeys(r["algorithm"] for r in rows))
    head = ["method", *(f"{_x_name(x_key)} = {x:g}" for x in xs)]
    if ceilings:
        sigmas = sorted({_num(r["sigma"]) for r in ceilings.values()})
        head.append(f"without noise (σ = {', '.join(sigmas)}; not private)")
    out = [
        "Test accuracy % (mean ± std over seeds) / test loss"
        + ("" if by_epsilon else " (ε the ledger gives)")
        + ", final round:",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for method in methods:
        cells = {r["x"]: r for r in rows if r["algorithm"] == method}
        ceiling = [_cell(ceilings[method], spent=False) if method in ceilings else "–"] if ceilings else []
        if set(cells) == {None}:  # a non-private reference: one result, shown in every column
            text = _cell(cells[None], spent=False)
            out.append(f"| {method} (non-private) | " + " | ".join([*(text for _ in xs), *ceiling]) + " |")
            continue
        texts = [_cell(cells[x], spent=not by_epsilon) if x in cells else "–" for x in xs]
        out.append(f"| {method} | " + " | ".join([*texts, *ceiling]) + " |")
    out.append("")
    if by_epsilon:
        ratios = [
            r["epsilon_max"] / r["target_epsilon"]
            for r in rows
            if r["epsilon_max"] is not None and r["target_epsilon"]
        ]
        if ratios and max(ratios) - 1 <= 1e-3 and 1 - min(ratios) <= 1e-3:
            out += ["ε spent (the ledger's): the target, within 0.1 %, in every private run.", ""]
        elif ratios:
            out += [
                f"ε spent (the ledger's, every private run): between {min(ratios):.4g} and "
                f"{max(ratios):.4g} times the target.",
                "",
            ]
    return out


def _parameters(sweep: Sweep, x_key: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Returns each method's configured parameters and the σ it ran with at each x."""
    params = sweep.base.get(PER_ALGORITHM) or {}
    items = []
    for method in dict.fromkeys(r["algorithm"] for r in rows if not r["role"]):
        given = ", ".join(f"{k} {v}" for k, v in (params.get(method) or {}).items()) or "its defaults"
        sigmas = [
            f"{_num(r['sigma'])} at {_x_name(x_key)} = {r['x']:g}"
            for r in rows
            if r["algorithm"] == method and not r["role"] and r["sigma"] is not None and r["x"] is not None
        ]
        items.append(f"- {method}: {given}" + (f"; σ {', '.join(sigmas)}" if sigmas else ""))
    return ["Parameters (as configured; a tuned method's candidates set their own below):", "", *items, ""]


def _sensitivity(setting: Setting, variant: str, report: Report) -> list[str]:
    """Returns the sensitivity table of each method under `sensitivity` or `tune`: its configured (or
    tuned) cell and each candidate, with σ, accuracy per x and each claim's verdict with that line
    standing in."""
    out: list[str] = []
    lines = [
        s for s in report.sensitivity if s.setting == setting.name and variant_label(s.variant) == variant
    ]
    x_key = setting.block.x
    for method in dict.fromkeys(s.method for s in lines):
        mine = [s for s in lines if s.method == method]
        xs = sorted({r["x"] for s in mine for r in s.rows if r["x"] is not None})
        claims = len(mine[0].verdicts)
        sigma = len(xs) == 1  # several x: each line's σ per x is in the parameters above
        head = [method, *(["σ"] if sigma else []), *(f"{_x_name(x_key)} = {x:g}" for x in xs)]
        head += [f"claim {i + 1}" if claims > 1 else "the claim" for i in range(claims)]
        out += [
            f"Sensitivity of the verdict to {method}'s unstated choices (each line stands for {method} "
            "in turn; accuracy % and verdict, with how far it is ahead (+) or behind (−)):",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for s in mine:
            cells = {r["x"]: r for r in s.rows}
            sigmas = [", ".join(sorted({_num(r["sigma"]) for r in s.rows if r["sigma"] is not None})) or "–"]
            texts = [
                *(sigmas if sigma else []),
                *(_cell(cells[x], spent=False) if x in cells else "–" for x in xs),
            ]
            verdicts = [v.verdict + ("" if v.gap is None else f" ({_signed(v)})") for v in s.verdicts]
            name = s.candidate or ("as tuned" if method in setting.block.tune else "as configured")
            out.append(f"| {name} | " + " | ".join([*texts, *verdicts]) + " |")
        if claims > 1:
            out += ["", " ".join(f"Claim {i + 1}: {v.claim.text}." for i, v in enumerate(mine[0].verdicts))]
        out.append("")
    return out


def _signed(verdict: Verdict) -> str:
    gap = verdict.gap if verdict.claim.metric == "loss" else 100 * verdict.gap
    return f"{gap:+.2f}".replace("-", "−")


def _tuned(x_key: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Returns the candidates each tuned cell chose, with every candidate's training loss."""
    fixed = {r["algorithm"]: r["tuned"] for r in rows if r["tuned_losses"] and len(r["tuned_losses"]) == 1}
    tuned = [r for r in rows if r["tuned_losses"] and len(r["tuned_losses"]) > 1]
    out = []
    if fixed:  # one candidate: no choice, just the method's own setting
        out += ["Set per method: " + "; ".join(f"{m}: {label}" for m, label in fixed.items()) + ".", ""]
    if not tuned:
        return out
    out += [
        "Tuned by final training loss (mean over seeds; the lowest stands for the method above). "
        "The choice reads training loss, a diagnostic of the silos' data that no ledger covers, as "
        "the paper's tuning does:",
        "",
        f"| method | {_x_name(x_key)} | chosen | training loss of each candidate |",
        "|---|---|---|---|",
    ]
    for r in tuned:
        losses = ", ".join(f"{label} {_num(loss)}" for label, loss in r["tuned_losses"].items())
        out.append(f"| {r['algorithm']} | {_num(r['x'])} | {r['tuned']} | {losses} |")
    return [*out, ""]


def _paper_numbers(x_key: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    cells = [r for r in rows if r["paper_value"] is not None]
    if not cells:
        return []
    out = [
        "The paper's numbers next to ours:",
        "",
        f"| method | {_x_name(x_key)} | metric | the paper | ours | ε the paper states | ε we spent "
        "| source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in cells:
        x = "–" if r["x"] is None else f"{r['x']:g}"
        metric = str(r["paper_metric"]).replace("_", " ")
        out.append(
            f"| {r['algorithm']} | {x} | {metric} | {_num(r['paper_value'])} | {_num(r['ours'])} | "
            f"{_num(r['paper_epsilon'])} | {_num(r['epsilon_max'])} | {r['paper_source']} |"
        )
    return [*out, ""]


def _num(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.4g}"


def _claims(setting: Setting, variant: str, report: Report) -> list[str]:
    items = [
        f"- **{v.verdict}**: {v.claim.text}. We measure: {v.detail}."
        for v in report.verdicts
        if v.setting == setting.name and variant_label(v.variant) == variant
    ]
    return ["The paper's claims:", "", *items, ""] if items else []


def _privacy(report: Report) -> list[str]:
    lines = ["### Privacy corrections", ""]
    if report.calibrations:
        lines += _calibration_table(report.calibrations)
    if report.unprojected:
        lines += ["The paper's calibration could not be accounted for:", ""]
        lines += [f"- {line}" for line in report.unprojected]
        lines.append("")
    if report.corrections:
        lines += [
            "The stated ε of these runs does not cover all they released: the ledger's ε is above it, "
            "or something was computed from private data that no ε covers (each line says which):",
            "",
        ]
        lines += [f"- {line}" for line in report.corrections]
        lines.append("")
    else:
        untargeted = any(o.epsilon is not None and o.target_epsilon is None for o in report.outcomes)
        lines += [
            "No run's ledger ε exceeds the ε it targets."
            + (
                " Runs given σ or a μ target state no ε; the tables show what their ledgers give."
                if untargeted
                else ""
            ),
            "",
        ]
    return lines


def _calibration_table(calibrations: Sequence[PaperCalibration]) -> list[str]:
    """Returns one line per (setting, variant, method): the ledger ε of the paper's σ at each target."""
    targets = sorted({c.target_epsilon for c in calibrations})
    out = [
        "The paper's own noise calibration (`calibration: paper`) in each setting as configured "
        "here (its batch size and records per silo), accounted by the ledger (add/remove one "
        "record): the ε it spends at each stated ε. **Bold**: above the stated ε, so the paper's σ "
        "under-protects in that setting. A setting that differs from the paper's own is not what "
        "the paper's runs spent.",
        "",
        "| setting | method | accountant, δ | " + " | ".join(f"stated ε = {t:g}" for t in targets) + " |",
        "|---|---|---|" + "---|" * len(targets),
    ]
    groups: dict[tuple, dict[float, PaperCalibration]] = {}
    for c in calibrations:
        key = (c.setting, variant_label(c.variant), c.algorithm, f"{c.accountant}, {number_text(c.delta)}")
        groups.setdefault(key, {})[c.target_epsilon] = c
    # candidates that differ in what the paper's σ does not depend on (a step size) spend alike:
    # one line for each method's candidates with the same numbers
    lines: dict[tuple, list[str]] = {}
    for (setting, variant, algorithm, accounting), by_target in groups.items():
        method, _, candidate = algorithm.partition(" (")
        cells = tuple(_spent(by_target.get(t)) for t in targets)
        key = (setting, variant, method, accounting, cells)
        lines.setdefault(key, []).append(candidate.removesuffix(")"))
    methods = Counter((setting, variant, method) for setting, variant, method, *_ in lines)
    for (setting, variant, method, accounting, cells), candidates in lines.items():
        name = setting + (f" ({variant})" if variant else "")
        out.append(
            f"| {name} | {method}{_candidates(candidates, alone=methods[setting, variant, method] == 1)} "
            f"| {accounting} | " + " | ".join(cells) + " |"
        )
    return [*out, ""]


def _candidates(labels: Sequence[str], *, alone: bool) -> str:
    """Returns the bracket naming the candidates of a line ("" for an untuned method)."""
    labels = [label for label in labels if label]
    if not labels:
        return ""
    if len(labels) == 1:
        return f" ({labels[0]})"
    if alone:
        return f" (every candidate: {len(labels)})"
    return (
        f" ({len(labels)} candidates: {labels[0]} … {labels[-1]})"
        if len(labels) > 2
        else f" ({'; '.join(labels)})"
    )


def _spent(calibration: PaperCalibration | None) -> str:
    if calibration is None:
        return "–"
    text = f"{calibration.epsilon:.4g}"
    return f"**{text}**" if calibration.under_protects else text

"""Benchmark: wall time of `dpfl reproduce PAPER --quick` for each paper; target under 1 minute
(issue 19; it was 5 minutes before).

For every paper `dpfl reproduce` knows, the command a reader would type first, run as that
reader runs it (`python -m dpfl reproduce PAPER --quick --out <tmp>`, a fresh process with an
empty DPFL_HOME, the data from DPFL_DATA_DIR, every run of the quick sweeps here, then
summary.csv and report.html): its
wall time, its peak RSS and whether it succeeded. A paper none of whose configs/paper/*.yaml has
a `reproduce:` block with a `quick:` part is listed as skipped, with the reason.

Which papers can run, and how many runs each quick sweep holds, is read through
`dpfl.reproduce.load_paper` in a child process (`--plan`): importing dpfl here would import
torch, and on Linux a child's peak RSS starts at its parent's, which would inflate every
paper's figure.

Usage: python -m benchmarks.reproduce [--papers NAME ...] [--timeout SECONDS] [--no-write]
Exits 1 when a paper's reproduction fails or takes a minute or more.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from benchmarks.all import Child, run_child
from benchmarks.report import machine, print_headline, publish

TITLE = "Quick reproductions"  # the section of docs/benchmarks.md
DOC = Path(__file__).resolve().parents[1] / "docs" / "reproduction.md"  # the full sweeps' verdicts
_VERDICT = re.compile(r"^- \*\*(holds|does not hold|cannot be checked)\*\*: (.*?)\. We measure:", re.M)
TARGET_S = 60.0
DEFAULT_TIMEOUT_S = 1800.0  # a paper's run is stopped after this (30× the target)


def plan_here() -> dict[str, dict[str, Any]]:
    """Returns per paper its quick sweeps' settings and run count, or why it cannot run yet.

    Imports dpfl: call it in the `--plan` child only.
    """
    from dpfl.errors import DpflError
    from dpfl.reproduce import PAPERS, ConfigError, default_config_dir, load_paper, quick_settings

    folder = default_config_dir()
    out: dict[str, dict[str, Any]] = {}
    for paper in PAPERS:
        try:
            settings = load_paper(paper, folder)
        except ConfigError as exc:
            out[paper] = {"skip": f"invalid config: {exc}"}
            continue
        except DpflError:
            out[paper] = {"skip": "none of its configs has a `reproduce:` block yet"}
            continue
        without = [s.path.name for s in settings if s.block.quick is None]
        if without:
            out[paper] = {"skip": f"no `reproduce.quick` block in {', '.join(without)}"}
            continue
        try:
            settings, left_out = quick_settings(settings)
            runs = sum(len(s.sweep(quick=True).points) for s in settings)
        except DpflError as exc:
            out[paper] = {"skip": f"invalid quick sweep: {exc}"}
            continue
        out[paper] = {"settings": [s.name for s in settings], "runs": runs, "left_out": sorted(left_out)}
    return out


def plan(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Returns `plan_here()` as computed by a child process (see the module docstring)."""
    child = run_child([sys.executable, "-m", "benchmarks.reproduce", "--plan"], env=env, echo=False)
    if child.exit_code != 0:
        raise RuntimeError("planning the reproductions failed:\n" + "\n".join(child.stderr_tail))
    return json.loads(child.stdout.strip().splitlines()[-1])


def claim_verdicts(markdown: str) -> list[tuple[str, str]]:
    """Returns (claim, verdict) for every verdict line of a `dpfl reproduce` Markdown section."""
    return [(claim, verdict) for verdict, claim in _VERDICT.findall(markdown)]


def full_verdicts(paper: str, doc: Path = DOC) -> list[tuple[str, str]]:
    """Returns the verdicts of the paper's full sweep, as its section of docs/reproduction.md has them."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    begin, end = f"<!-- dpfl reproduce {paper}: begin -->", f"<!-- dpfl reproduce {paper}: end -->"
    if begin not in text:
        return []
    return claim_verdicts(text.split(begin, 1)[1].split(end, 1)[0])


def compare_verdicts(quick: Sequence[tuple[str, str]], full: Sequence[tuple[str, str]]) -> str:
    """Returns how many of the quick run's verdicts the full sweep's match, naming any that differ."""
    if not quick:
        return "no claim checked"
    if not full:
        return f"{len(quick)} checked; no full sweep in docs/reproduction.md to compare"
    differ = [
        f"“{claim[:60]}…”: quick {verdict}, full {dict(full).get(claim, 'not checked')}"
        for claim, verdict in quick
        if dict(full).get(claim) != verdict
    ]
    text = f"{len(quick) - len(differ)} of {len(quick)} as in the full sweep"
    return text + (f" (differs: {'; '.join(differ)})" if differ else "")


def reproduce(paper: str, out: Path, *, env: Mapping[str, str], timeout: float) -> Child:
    """Runs `dpfl reproduce PAPER --quick --out OUT` in a fresh process; returns what it left."""
    argv = [sys.executable, "-m", "dpfl", "reproduce", paper, "--quick", "--out", str(out)]
    return run_child(argv, env=env, timeout=timeout)


def render(
    plans: Mapping[str, dict[str, Any]],
    results: Mapping[str, Child],
    verdicts: Mapping[str, str] | None = None,
) -> tuple[str, bool]:
    """Returns the section's body, and whether every paper that ran succeeded within the target.

    `verdicts` says per paper how the quick run's claim verdicts compare with the full sweep's.
    """
    verdicts = verdicts or {}
    lines = [
        "`dpfl reproduce PAPER --quick --out <tmp>` per paper, in a fresh process, as a reader runs "
        "it: every run of the paper's quick sweeps (the `reproduce.quick` block of its "
        "configs/paper/*.yaml) one after the other here, then summary.csv, report.html and "
        "reproduction.md. Data from DPFL_DATA_DIR; wall time includes start-up and loading the data. "
        "\"Claims\" compares the quick run's verdicts on the paper's claims with the full sweep's "
        "(docs/reproduction.md): whether the reduced run already shows the same ordering of methods.",
        "",
        "| paper | configs | runs | wall time | peak RSS | target | met | claims | note |",
        "|---|---|---:|---:|---:|---:|:-:|---|---|",
    ]
    ok, target = True, f"< {TARGET_S / 60:g} min"
    for paper, p in plans.items():
        if "skip" in p:
            lines.append(f"| {paper} | — | — | — | — | {target} | — | — | skipped: {p['skip']} |")
            continue
        configs = ", ".join(f"`{s}.yaml`" for s in p["settings"])
        child = results.get(paper)
        if child is None:
            lines.append(f"| {paper} | {configs} | {p['runs']} | — | — | {target} | — | — | not run |")
            continue
        met = child.exit_code == 0 and child.wall_s < TARGET_S
        ok &= met
        if child.timed_out:
            note = "stopped: timed out"
        elif child.exit_code != 0:
            last = next((line for line in reversed(child.stderr_tail) if line.strip()), "")
            note = f"failed (exit {child.exit_code}): {last.strip()[:160]}".replace("|", "\\|")
        else:
            note = "; ".join(f"`{s}.yaml` left out of --quick (its `skip`)" for s in p.get("left_out", ()))
        lines.append(
            f"| {paper} | {configs} | {p['runs']} | {_minutes(child.wall_s)} | "
            f"{child.peak_rss_mib:,.0f} MiB | {target} | {'yes' if met else '**no**'} | "
            f"{verdicts.get(paper, '—')} | {note} |"
        )
    m = machine()
    lines += [
        "",
        f"Machine: {m['cores']} cores, {m['cpu']}, {m['platform']}, Python {m['python']}, "
        f"torch {m['torch']}. Peak RSS: the largest resident set of the command's process.",
    ]
    return "\n".join(lines), ok


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def headline(plans: Mapping[str, dict[str, Any]], results: Mapping[str, Child], ok: bool) -> None:
    """Prints the JSON line of headline numbers that benchmarks/all.py reads."""
    ran = [
        f"{paper} {_minutes(c.wall_s)}" + ("" if c.exit_code == 0 else " (failed)")
        for paper, c in results.items()
    ]
    reasons: dict[str, list[str]] = {}
    for paper, p in plans.items():
        if "skip" in p:
            reasons.setdefault(p["skip"], []).append(paper)
    parts = ran + [f"{', '.join(papers)} skipped: {reason}" for reason, papers in reasons.items()]
    print_headline(
        "reproduce",
        headline="; ".join(parts) or "no paper run",
        target=f"< {TARGET_S / 60:g} min per paper",
        met=ok if results else None,
        wall_s={paper: c.wall_s for paper, c in results.items()},
        peak_rss_mib={paper: c.peak_rss_mib for paper, c in results.items()},
        exit_code={paper: c.exit_code for paper, c in results.items()},
        skipped={paper: p["skip"] for paper, p in plans.items() if "skip" in p},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", nargs="*", help="only these papers (default: every paper)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per paper")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--plan", action="store_true", help=argparse.SUPPRESS)  # child mode of plan()
    args = parser.parse_args(argv)
    if args.plan:
        print(json.dumps(plan_here()))
        return 0
    env = dict(os.environ)
    plans = plan(env)
    if args.papers:
        unknown = sorted(set(args.papers) - set(plans))
        if unknown:
            parser.error(f"unknown paper {', '.join(unknown)}; known: {', '.join(plans)}")
        plans = {paper: p for paper, p in plans.items() if paper in args.papers}
    results: dict[str, Child] = {}
    verdicts: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="dpfl-reproduce-") as tmp:
        for paper, p in plans.items():
            if "skip" in p:
                print(f"{paper}: skipped: {p['skip']}", file=sys.stderr, flush=True)
                continue
            print(f"{paper}: {p['runs']} runs ({', '.join(p['settings'])})", file=sys.stderr, flush=True)
            # a fresh, empty DPFL_HOME per paper: the cold start a newcomer sees (issue 43), with
            # no prepared dataset or stored projection from an earlier run
            home = env | {"DPFL_HOME": str(Path(tmp) / f"{paper}-home")}
            results[paper] = reproduce(paper, Path(tmp) / paper, env=home, timeout=args.timeout)
            section = Path(tmp) / paper / "reproduction.md"
            if section.exists():
                quick = claim_verdicts(section.read_text(encoding="utf-8"))
                verdicts[paper] = compare_verdicts(quick, full_verdicts(paper))
    body, ok = render(plans, results, verdicts)
    publish(TITLE, body, write=not args.no_write)
    headline(plans, results, ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

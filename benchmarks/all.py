"""Runs every benchmark, each in a process of its own, and writes the Summary of docs/benchmarks.md.

Each benchmark still writes its own section (its full table, how it was measured, the machine);
this adds the section "Summary" at the top: how many targets were met, then one row per
benchmark with what it measures, its headline as measured in this run, its target and whether
it was met (or why it did not finish), its wall time and its peak resident memory, then the
machine and the date in one line. A benchmark hands its headline over as the last JSON line of its stdout
(`benchmarks.report.print_headline`); for one that prints only its markdown table, the table's
speed-up column stands in (`_headline_from_table`).

Why a process per benchmark: peak RSS is a high-water mark, so in one process the first
benchmark's peak would hide the others'. `os.wait4` returns the child's resource usage, whose
`ru_maxrss` is the largest resident set of the child and of every process it waited for (the
engine's per-variant processes, the API's server and load generator, the reproductions). On
Linux a child's `ru_maxrss` starts at its parent's high-water mark (exec keeps it), which is
why this module imports nothing heavy (no torch, no dpfl).

Usage: python -m benchmarks.all [--only NAME[,NAME]] [--skip NAME[,NAME]] [--no-write]
       [--timeout SECONDS]
Exits 1 when a benchmark fails or misses its target.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, too
    sys.path.insert(0, str(ROOT))

from benchmarks.report import machine, write_section  # noqa: E402

TITLE = "Summary"
KILL_GRACE_S = 10.0  # after SIGTERM on a timeout, SIGKILL this much later


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what it compares, the section it writes, and how it is started."""

    name: str
    what: str
    section: str  # its section's title in docs/benchmarks.md
    argv: tuple[str, ...]  # after the Python interpreter


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "engine",
            "one ISRL-DP MB-SGD round: engine vs per-silo loop vs non-private",
            "Engine: one ISRL-DP MB-SGD round",
            ("-m", "benchmarks.engine"),
        ),
        Benchmark(
            "uldp",
            "one ULDP-AVG round: vectorised over users vs per-user loop",
            "ULDP-AVG: vectorised over users vs per-user loop",
            ("-m", "benchmarks.uldp"),
        ),
        Benchmark(
            "devices",
            "a CIFAR-10 ISRL-DP round and a ULDP-AVG MNIST CNN round: engine vs loop, on each device",
            "Devices: the engine against the loop on the CPU",
            ("-m", "benchmarks.devices"),
        ),
        Benchmark(
            "ledger",
            "ε of 100 parties × 1,000 rounds: ledger recompute vs per-party loop",
            "Ledger: ε of 100 parties × 1,000 rounds",
            ("-m", "benchmarks.ledger"),
        ),
        Benchmark(
            "calibration",
            "each of 25 silos its own σ for ε = 3: pruned RDP orders vs every order, and a cache hit",
            "Calibration: each of 25 silos its own σ",
            ("-m", "benchmarks.calibration"),
        ),
        Benchmark(
            "cli",
            "CLI start-up: `dpfl --help` and `dpfl privacy epsilon`, against the eager imports",
            "CLI start-up",
            ("-m", "benchmarks.cli"),
        ),
        Benchmark(
            "audit",
            "ε lower bound (10⁶ trials) vs ledger ε at ε = 4, per Gaussian family, and a planted bug",
            "Audit: ε lower bound vs ledger ε at ε = 4",
            ("-m", "benchmarks.audit"),
        ),
        Benchmark(
            "audit_bugs",
            "`dpfl audit` on ten planted bugs (a plugin), and the correct algorithms over three seeds",
            "Audit: power on planted bugs",
            ("-m", "benchmarks.audit_bugs"),
        ),
        Benchmark(
            "api",
            "API latency under load: runs list, sweep submission, live events",
            "API: runs list, sweep submission and live events",
            ("-m", "benchmarks.api"),
        ),
        Benchmark(
            "pages",
            "dashboard page loads (Runs, Compare) in Chromium with 1,000 runs in the database",
            "Dashboard: page loads with 1,000 runs",
            ("-m", "benchmarks.pages"),
        ),
        Benchmark(
            "sweep",
            "the isrl_mnist setting of `dpfl reproduce isrl` (63 runs when the target was set, 126 "
            "with SPIDER tuned) in one process against their own training and evaluation",
            "Sweep: a reproduction's runs against their own training",
            ("-m", "benchmarks.sweep"),
        ),
        Benchmark(
            "peers",
            "ISRL-DP MB-SGD and DP-FedAvg on MNIST, and an ε × seed sweep: ours against Opacus, Flower "
            "and pfl-research (their own venv), whole process and per round, with an accountant table",
            "Peers: against Opacus, Flower and pfl-research",
            ("-m", "benchmarks.peers"),
        ),
        Benchmark(
            "reproduce",
            "`dpfl reproduce PAPER --quick`, wall time per paper",
            "Quick reproductions",
            ("-m", "benchmarks.reproduce"),
        ),
    )
}


@dataclass
class Child:
    """What a finished child process left: exit code, wall time, peak RSS, its output."""

    exit_code: int
    wall_s: float
    peak_rss_mib: float
    stdout: str
    stderr_tail: list[str] = field(default_factory=list)
    timed_out: bool = False


def run_child(
    argv: Sequence[str],
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    echo: bool = True,
) -> Child:
    """Runs `argv` to its end and returns its exit code, wall time, peak RSS and output.

    The child leads a process group of its own, so that a timeout (or Ctrl-C here) ends it
    with everything it started. Its stdout is kept whole (for the headline), its stderr's last
    lines (for the reason of a failure); both are echoed here as they come when `echo`.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=_pump, args=(proc.stdout, out, sys.stdout if echo else None), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err, sys.stderr if echo else None), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        _signal_group(proc.pid, signal.SIGTERM)
        time.sleep(KILL_GRACE_S)
        _signal_group(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, expire) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # Ctrl-C: take the child's group down with us
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        if timer:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
    wall = time.perf_counter() - start
    for reader in readers:
        reader.join(timeout=5)  # a grandchild left running may hold the pipes open
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return Child(
        exit_code=proc.returncode,
        wall_s=wall,
        peak_rss_mib=usage.ru_maxrss * scale / 2**20,
        stdout="".join(out),
        stderr_tail=[line.rstrip("\n") for line in err[-20:]],
        timed_out=timed_out.is_set(),
    )


def _pump(stream: IO[bytes], keep: list[str], echo: IO[str] | None) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        keep.append(line)
        if echo is not None:
            echo.write(line)
            echo.flush()
    stream.close()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pid, sig)


def headline_of(stdout: str) -> dict[str, Any] | None:
    """Returns a benchmark's headline: its last JSON line on stdout, else one read off its table."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and "headline" in data:
                return data
    return _headline_from_table(stdout)


def _headline_from_table(stdout: str) -> dict[str, Any] | None:
    """Returns the headline of the first printed markdown table with `speed-up` and `met` columns.

    Each row's label is the first cell up to its colon, plus the parts of the rest that tell it
    apart from the rows of the same label ("MNIST 100 zipf users, CNN"). `met` is whether every
    row with a target met it (None when no row has one).
    """
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for line in stdout.splitlines():
        if not line.startswith("|"):
            if rows:
                break  # the end of the table
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if "speed-up" in cells and "met" in cells else None
        elif len(cells) == len(header) and not set("".join(cells)) <= set("-:"):
            rows.append(dict(zip(header, cells, strict=True)))
    if header is None or not rows:
        return None
    labels = _distinct_labels([row[header[0]] for row in rows])
    targeted = [row for row in rows if row.get("target", "—") not in ("—", "")]
    return {
        "headline": "speed-up "
        + "; ".join(f"{label} {row['speed-up']}" for label, row in zip(labels, rows, strict=True)),
        "target": ", ".join(sorted({row["target"] for row in targeted})) or "—",
        "met": all(row["met"].strip("*").lower() == "yes" for row in targeted) if targeted else None,
    }


def _distinct_labels(descriptions: list[str]) -> list[str]:
    """Returns a short label per description: its head (before ':') and what sets it apart."""
    split = []
    for text in descriptions:
        head, _, rest = text.partition(":")
        parts = [re.sub(r"\s*\(.*", "", p).strip() for p in rest.split(", ")]  # "10,000" stays whole
        split.append((head.strip(), [p for p in parts if p]))
    labels = []
    for head, parts in split:
        siblings = [set(p) for h, p in split if h == head]
        own = [p for p in parts if p not in set.intersection(*siblings)]
        labels.append(" ".join([head, ", ".join(own)]) if own else head)
    return labels


@dataclass
class Outcome:
    """One benchmark's row: None fields when it was not run in this run."""

    benchmark: Benchmark
    child: Child | None = None
    headline: dict[str, Any] | None = None


def render_summary(outcomes: Sequence[Outcome], info: Mapping[str, Any], total_s: float) -> str:
    """Returns the Summary section's body: a verdict line, one row per benchmark, then the machine.

    Written to be read in a minute: what each benchmark measures, its headline, its target and
    whether it met it, a column each. How and where each number was measured, and any note on
    it, sits under the benchmark's own section, which its name links to.
    """
    ran = [o for o in outcomes if o.child is not None]
    missed = [o.benchmark.name for o in ran if _verdict(o) not in ("yes", "—")]
    verdict = f"**{len(ran) - len(missed)} of {len(ran)} benchmarks run met their targets**" + (
        f"; missed or failed: {', '.join(missed)}" if missed else ""
    )
    if len(ran) < len(outcomes):
        verdict += f"; {len(outcomes) - len(ran)} not run in this run (their sections below are older)"
    lines = [
        verdict + ".",
        "",
        "Each benchmark of `python -m benchmarks.all` ran in a process of its own, one after the other "
        "in this one run. Peak RSS: the largest resident set of its process or of any it started.",
        "",
        "| benchmark | what it measures | headline (this run) | target | met | wall time | peak RSS |",
        "|---|---|---|---|:-:|---:|---:|",
    ]
    for o in outcomes:
        b = o.benchmark
        name = f"[{b.name}](#{_anchor(b.section)})"
        if o.child is None:
            lines.append(f"| {name} | {_cell(b.what)} | not run in this run | — | — | — | — |")
            continue
        c, h = o.child, o.headline or {}
        lines.append(
            f"| {name} | {_cell(b.what)} | {_cell(h.get('headline') or _failure(c))} | "
            f"{_cell(h.get('target') or '—')} | {_verdict(o)} | {_duration(c.wall_s)} | "
            f"{c.peak_rss_mib:,.0f} MiB |"
        )
    load = info.get("load_average")
    busy = load is not None and load[0] >= 1.0  # a whole core's worth of other work
    lines += [
        "",
        f"Machine: {info['cores']} cores, {info['cpu']}, {info['platform']}, Python {info['python']}, "
        f"torch {info['torch']}. Run started {info['date']}; total wall time {_duration(total_s)}"
        + (
            ""
            if load is None
            else f"; load average at the start {load[0]:.1f} (1 min) on {info['cores']} cores"
        )
        + (
            ": other work shared the machine (the engine and ULDP benchmarks interleave their variants, "
            "so it slows both sides of their ratios alike)."
            if busy
            else "."
        ),
    ]
    return "\n".join(lines)


def _verdict(outcome: Outcome) -> str:
    """Returns the met cell: yes, **no**, — (no target), or why the benchmark did not finish."""
    child, met = outcome.child, (outcome.headline or {}).get("met")
    if child is None:
        return "—"
    if child.timed_out:
        return f"**timed out** ({child.exit_code})"
    if child.exit_code != 0 and met is not False:
        # a benchmark exits 1 when it misses its target; any other failure says so, even where the
        # numbers it printed look fine
        return f"**failed** (exit {child.exit_code})"
    return {True: "yes", False: "**no**", None: "—"}[met]


def _failure(child: Child) -> str:
    last = next((line for line in reversed(child.stderr_tail) if line.strip()), "no output")
    return f"failed: {last.strip()[:200]}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(title: str) -> str:
    """Returns GitHub's anchor for a heading (lower case, punctuation dropped, spaces to '-')."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.1f} min"


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {', '.join(map(repr, unknown))}; known: {', '.join(BENCHMARKS)}"
        )
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Returns the options, with `selected`: the benchmarks to run, in the summary's order."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.all", description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=_names, action="extend", metavar="NAME[,NAME]", help="run only these")
    parser.add_argument(
        "--skip", type=_names, action="extend", default=[], metavar="NAME[,NAME]", help="do not run these"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print the tables only (passed on to every benchmark)"
    )
    parser.add_argument("--timeout", type=float, help="seconds after which a benchmark is stopped")
    args = parser.parse_args(argv)
    wanted = set(args.only or BENCHMARKS) - set(args.skip)
    args.selected = [name for name in BENCHMARKS if name in wanted]
    if not args.selected:
        parser.error("no benchmark left to run")
    return args


def run(
    benchmarks: Mapping[str, Benchmark], selected: Sequence[str], *, no_write: bool, timeout: float | None
) -> list[Outcome]:
    """Runs the selected benchmarks one after the other; returns a row per benchmark of `benchmarks`."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    default_data = ROOT.parent / "shared" / "data"  # the Makefile's default
    if "DPFL_DATA_DIR" not in env and default_data.is_dir():
        env["DPFL_DATA_DIR"] = str(default_data)
    outcomes = []
    for name, bench in benchmarks.items():
        if name not in selected:
            outcomes.append(Outcome(bench))
            continue
        print(f"\n=== {name}: {bench.what}", file=sys.stderr, flush=True)
        argv = [sys.executable, *bench.argv, *(["--no-write"] if no_write else [])]
        child = run_child(argv, timeout=timeout, env=env)
        outcomes.append(Outcome(bench, child, headline_of(child.stdout)))
        print(
            f"=== {name}: exit {child.exit_code}, {_duration(child.wall_s)}, "
            f"peak RSS {child.peak_rss_mib:,.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine() | {"load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}
    start = time.perf_counter()
    outcomes = run(BENCHMARKS, args.selected, no_write=args.no_write, timeout=args.timeout)
    body = render_summary(outcomes, info, time.perf_counter() - start)
    print(f"\n## {TITLE}\n\n{body}")
    if not args.no_write:
        write_section(TITLE, body, first=True)
    ran = [o for o in outcomes if o.child is not None]
    ok = all(o.child.exit_code == 0 and (o.headline or {}).get("met") is not False for o in ran)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Writes a benchmark's table into its own section of docs/benchmarks.md, keeping the others.

Also what every benchmark reports alike: the machine it ran on (`machine`), the date stamp under
each section, and the one JSON line of headline numbers that `benchmarks/all.py` reads from a
benchmark's stdout (`print_headline`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\nEach section is written by the benchmark named in it (`make bench` runs them all).\n"
)


def write_section(title: str, body: str, *, doc: Path = DOC, first: bool = False) -> None:
    """Replaces (or adds) the section `## {title}` of the document with `body` and a date stamp.

    A new section goes last, or before every other section when `first` (the summary).
    """
    text = doc.read_text() if doc.exists() else HEADER
    section = f"## {title}\n\n{body.strip()}\n\n{stamp()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    elif first and (top := re.search(r"^## ", text, re.M)):
        text = text[: top.start()] + section + "\n" + text[top.start() :]
    else:
        text = text.rstrip() + "\n\n" + section
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text.rstrip() + "\n")


def publish(title: str, body: str, *, write: bool) -> None:
    """Prints the section `## {title}` and, when `write`, puts it into docs/benchmarks.md."""
    print(f"## {title}\n\n{body}")
    if write:
        write_section(title, body)


def machine() -> dict[str, Any]:
    """Returns what a number measured here depends on: cores, CPU model, OS, Python, torch, date.

    torch's version is read from its package metadata, not by importing it, so that a light
    process (benchmarks/all.py) stays light: a child's peak RSS on Linux starts at its parent's.
    """
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch,
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
    }


def cpu_model() -> str:
    """Returns the CPU's model name (from /proc/cpuinfo on Linux), or what the platform says."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def stamp() -> str:
    """Returns the line under a section: when, and on which CPU, its numbers were measured."""
    m = machine()
    return f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores)."


def print_headline(benchmark: str, *, headline: str, target: str, met: bool | None, **numbers: Any) -> None:
    """Prints the benchmark's headline as one JSON line on stdout (last line; benchmarks/all.py reads it).

    `headline` is the ratio or time a reader looks for, `target` what it must reach, `met`
    whether it did (None: no target applies); `numbers` are the raw values behind them.
    """
    line = {"benchmark": benchmark, "headline": headline, "target": target, "met": met, "numbers": numbers}
    print(json.dumps(line, ensure_ascii=False, default=float), flush=True)


def interleaved_medians(
    variants: Mapping[str, Callable[[int], Any]], repeats: int, *, first: int = 0
) -> dict[str, float]:
    """Returns the median wall-clock seconds of each variant over `repeats` calls, fn(first + i).

    The variants take turns, so a slow spell of the machine hits them alike, in a fresh order
    each repeat: in a fixed order the same variant always follows the slowest one (a Python
    loop that leaves the caches cold), which measured the engine's DP overhead at 1.52× instead
    of 1.22×.
    """
    samples: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    shuffler = random.Random(0)
    for i in range(repeats):
        shuffler.shuffle(order)
        for name in order:
            start = time.perf_counter()
            variants[name](first + i)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in samples.items()}

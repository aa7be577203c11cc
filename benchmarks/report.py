"""Writes a benchmark's table into its own section of docs/benchmarks.md, keeping the others."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\nEach section is written by the benchmark named in it (`make bench` runs them all).\n"
)


def write_section(title: str, body: str) -> None:
    """Replaces (or appends) the section `## {title}` of docs/benchmarks.md with `body`."""
    text = DOC.read_text() if DOC.exists() else HEADER
    section = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _: section + "\n", text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section
    )
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text.rstrip() + "\n")

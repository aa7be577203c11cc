"""A sweep summary as CSV: a header row, then one line per (algorithm, privacy target)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SUMMARY_COLUMNS", "summary_csv"]

SUMMARY_COLUMNS = (
    "algorithm",
    "setting",
    "notion",
    "target_epsilon",
    "noise_multiplier",
    "n",
    "accuracy_mean",
    "accuracy_std",
    "epsilon_mean",
    "epsilon_max",
)


def summary_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Returns the summary rows as CSV text; a missing value (None) is an empty cell."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SUMMARY_COLUMNS)
    writer.writerows([row[c] for c in SUMMARY_COLUMNS] for row in rows)
    return out.getvalue()

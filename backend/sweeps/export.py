"""Tables as CSV: a header row, then one line per row, every number as `dpfl.formats.cell_text`
writes it (a sweep summary: one line per (algorithm, configuration, privacy target))."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpfl.formats import cell_text

__all__ = ["SUMMARY_COLUMNS", "csv_text", "summary_csv"]

SUMMARY_COLUMNS = (
    "algorithm",
    "setting",
    "notion",
    "target_epsilon",
    "noise_multiplier",
    "n",
    "metric",
    "accuracy_mean",
    "accuracy_std",
    "epsilon_mean",
    "epsilon_max",
)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Returns the rows' `columns` as CSV text; a missing value (None) is an empty cell."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    writer.writerows([cell_text(row[c]) for c in columns] for row in rows)
    return out.getvalue()


def summary_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Returns a sweep's summary rows as CSV text."""
    return csv_text(rows, SUMMARY_COLUMNS)

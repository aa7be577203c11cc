"""How commands print results: JSON on stdout by default, a rich table with `--table`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["emit"]


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf/nan
    return value


def emit(result: Mapping[str, Any], *, table: bool, title: str = "") -> None:
    """Prints `result` as one JSON object, or as a two-column table."""
    if not table:
        print(json.dumps({k: _plain(v) for k, v in result.items()}, indent=2))
        return
    grid = Table(title=title or None, show_header=True)
    grid.add_column("quantity")
    grid.add_column("value", justify="right")
    for key, value in result.items():
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        grid.add_row(key, shown)
    Console().print(grid)

"""Numbers as every page, figure, message and export writes them: δ, ε and σ alike.

On screen, three significant digits and an exponent without Python's padding: 1e-5, 2.5e-6,
0.001, 4.38 (not 0.00001, 1e-05 or 4.377178). In a CSV cell, every digit (a file is read back by
programs), with the same exponent: 1e-5, 0.14612345. One module, so a δ reads the same in a
legend, an error message and a CSV cell.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cell_text", "number_text"]


def _unpadded(text: str) -> str:
    return text.replace("e-0", "e-").replace("e+0", "e+")


def number_text(value: float) -> str:
    """Returns `value` with three significant digits, exponents as people write them (1e-5)."""
    return _unpadded(f"{value:.3g}")


# A spreadsheet reads a cell that starts with one of these as a formula (`=HYPERLINK(…)`,
# `@SUM(…)`, `+cmd|…`): text a user typed (a run's name, its tags) must not run when opened.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell_text(value: Any) -> Any:
    """Returns a CSV cell: a float with every digit Python needs to read it back (exponents
    unpadded, 1e-5), None as an empty cell, text that a spreadsheet would run as a formula
    behind a quote (`'=1+1`), anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, float):
        return _unpadded(repr(value))
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value

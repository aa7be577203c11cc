"""Numbers as every page, figure, message and export writes them: δ, ε and σ alike.

Three significant digits, and an exponent without Python's padding: 1e-5, 2.5e-6, 0.001, 4.38
(not 0.00001, 1e-05 or 4.377178). One function, so a δ reads the same in a legend, an error
message and a CSV cell.
"""

from __future__ import annotations

__all__ = ["number_text"]


def number_text(value: float) -> str:
    """Returns `value` with three significant digits, exponents as people write them (1e-5)."""
    return f"{value:.3g}".replace("e-0", "e-").replace("e+0", "e+")

"""The majority-class baseline: the accuracy of always predicting the evaluation set's commonest label.

A private run that does not beat it by a clear margin has learnt nothing the label counts alone
would not give (the issue's examples: ``uldp_avg`` at 0.109 on digits, ``uldp_avg_w`` exactly at
the majority rate on a user's CSV). The counts come from the run's diagnostics
(``test_label_histogram``, written by ``dpfl.runner``): data read without noise, so the rate is
labelled "not private" wherever it is shown, and a protected run, whose diagnostics are
withheld, has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["GUESSING_MARGIN", "majority_accuracy", "no_better_than_guessing", "run_baseline"]

GUESSING_MARGIN = 0.005
"""Half a percentage point: a run within this of the majority rate is no better than guessing.

On the smallest evaluation sets we use (digits: 360 records) one record is 0.28 points, so the
margin is about two records: a run must beat the constant predictor by more than rounding.
"""


def majority_accuracy(histogram: Sequence[int] | None) -> float | None:
    """Returns the share of the commonest label in `histogram` (records per class), None if unknown or empty."""
    if not histogram:
        return None
    total = sum(int(c) for c in histogram)
    return max(int(c) for c in histogram) / total if total > 0 else None


def run_baseline(diagnostics: Mapping[str, Any] | None) -> float | None:
    """Returns the majority-class accuracy of a run from its diagnostics; None when withheld or not recorded."""
    if not diagnostics or diagnostics.get("withheld"):
        return None
    return majority_accuracy(diagnostics.get("test_label_histogram"))


def no_better_than_guessing(accuracy: float | None, baseline: float | None) -> bool | None:
    """Returns whether `accuracy` is at most `baseline` + GUESSING_MARGIN; None when either is unknown."""
    if accuracy is None or baseline is None:
        return None
    return accuracy <= baseline + GUESSING_MARGIN

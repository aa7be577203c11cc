"""The majority-class baseline: the accuracy of always predicting the evaluation set's commonest label.

A private run that does not beat it by a clear margin has learnt nothing the label counts alone
would not give (the issue's examples: ``uldp_avg`` at 0.109 on digits, ``uldp_avg_w`` exactly at
the majority rate on a user's CSV). The counts come from the run's diagnostics
(``test_label_histogram``, written by ``dpfl.runner``): data read without noise, so the rate is
labelled "not private" wherever it is shown, and a protected run, whose diagnostics are
withheld, has none.

A dataset reported in balanced accuracy (`dpfl.metrics`) has its own constant-predictor rate:
predicting any one class scores 1/|K| there, however rare the other classes (`chance_baseline`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "GUESSING_MARGIN",
    "chance_baseline",
    "guessing_margin",
    "majority_accuracy",
    "no_better_than_guessing",
    "run_baseline",
]

GUESSING_MARGIN = 0.005
"""The least margin, half a percentage point: a run must beat the constant predictor by more than rounding."""

_STANDARD_ERRORS = 2.0


def guessing_margin(rate: float, records: float) -> float:
    """Returns how far above the majority `rate` an accuracy must be to count as learnt something.

    The larger of half a percentage point and two standard errors of a guesser's accuracy on
    `records` evaluation records, ``2·√(p(1 − p)/n)``: on a small evaluation set a run a few
    records above the majority rate is still within what guessing gives. Digits (359 test
    records, p = 37/359) needs 3.2 points, so ``uldp_avg`` at 0.109 is flagged; MNIST (10,000,
    p = 0.1135) needs 0.63.
    """
    return max(GUESSING_MARGIN, _STANDARD_ERRORS * math.sqrt(rate * (1.0 - rate) / records))


def majority_accuracy(histogram: Sequence[int] | None) -> dict[str, float] | None:
    """Returns ``{"accuracy": share of the commonest label, "records": n}`` of `histogram`; None if empty."""
    if not histogram:
        return None
    total = sum(int(c) for c in histogram)
    return {"accuracy": max(int(c) for c in histogram) / total, "records": total} if total > 0 else None


def chance_baseline(histogram: Sequence[int] | None, metric: str = "accuracy") -> dict[str, float] | None:
    """Returns what a predictor blind to the features scores in `metric` on the evaluation set
    whose label counts are `histogram`, as ``{"accuracy": rate, "records": n}``; None if empty.

    accuracy: `majority_accuracy`. balanced_accuracy: a constant prediction scores 1/|K| over the
    |K| classes present, and ``records`` is |K|² / Σₖ 1/nₖ (|K| times the harmonic mean of the
    class counts), so that `guessing_margin(1/|K|, records)` is two standard errors of a uniform
    guesser's balanced accuracy, √((1/|K|²) Σₖ p(1 − p)/nₖ) with p = 1/|K|: the rarest class sets
    it (Creditcard's 74 test frauds among 42,721 records: a margin of 0.058).
    """
    if metric == "accuracy":
        return majority_accuracy(histogram)
    counts = [int(c) for c in histogram or () if int(c) > 0]
    if not counts:
        return None
    k = len(counts)
    return {"accuracy": 1.0 / k, "records": k * k / math.fsum(1.0 / c for c in counts)}


def run_baseline(diagnostics: Mapping[str, Any] | None, metric: str = "accuracy") -> dict[str, float] | None:
    """Returns a run's chance baseline in `metric` from its diagnostics (`chance_baseline`: the
    majority-class rate for accuracy); None when withheld or not recorded."""
    if not diagnostics or diagnostics.get("withheld"):
        return None
    return chance_baseline(diagnostics.get("test_label_histogram"), metric)


def no_better_than_guessing(accuracy: float | None, baseline: Mapping[str, float] | None) -> bool | None:
    """Returns whether `accuracy` is within `guessing_margin` of the `baseline` rate, both in one metric
    (`chance_baseline`: the majority rate for accuracy, 1/|K| for balanced accuracy); None: unknown."""
    if accuracy is None or baseline is None:
        return None
    rate = baseline["accuracy"]
    return accuracy <= rate + guessing_margin(rate, float(baseline["records"]))

"""Calibrated σ remembered in this process, by schedule and target."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dpfl.privacy.calibration.target import Target


# Calibrated σ by schedule and target: a sweep's runs, and a worker's repeated runs, calibrate
# the same schedules again and again. A schedule is known by its events at two σ (the probe's
# and twice it), which is what `make_events` makes of σ for every schedule a run builds. Only
# this process writes here; and a run's ε is always accounted afresh from what it released.
RESULTS: OrderedDict[str, float | np.ndarray] = OrderedDict()
KEPT = 512


def result_key(kind: str, probe: object, parties: tuple, target: Target, rtol: float) -> str:
    """Returns the cache key of a calibration: its schedule (the events at the probe σ), target and tolerance.

    Events are frozen dataclasses whose repr holds every field, floats exactly.
    """
    options = sorted(target.options.items())
    text = repr((kind, probe, parties, target.epsilon, target.delta, target.accountant, options, rtol))
    return hashlib.sha256(text.encode()).hexdigest()


def remember(key: str, sigma: float | np.ndarray) -> float | np.ndarray:
    RESULTS[key] = sigma.copy() if isinstance(sigma, np.ndarray) else sigma
    RESULTS.move_to_end(key)
    while len(RESULTS) > KEPT:
        RESULTS.popitem(last=False)
    return sigma

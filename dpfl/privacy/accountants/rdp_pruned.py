"""The RDP accountant's ε of one event, computing only the orders that can matter.

`RDPAccountant` computes an event's curve at every tracked order (161 by default) and takes
the minimum of rdp(α) + offset(α). Calibration asks that question for hundreds of fresh
(sampling rate, σ) pairs, and each full curve costs 50–130 ms in dp_accounting, mostly at
small fractional orders whose series converge slowly and which never hold the minimum.

`pruned_epsilon` gives the same number from a handful of orders, by branch and bound on two
properties of any Rényi divergence D_α between two fixed distributions (van Erven and
Harremoës 2014, Thms 3 and 11): D_α is non-decreasing in α, and h(α) = (α − 1)·D_α is
convex with h(1) = 0. Sums (composition) and maxima (parallel releases) of such curves keep
both. From the orders computed so far, each other order gets a lower bound on its rdp:

- the secant of h through the two nearest computed orders below it (or through (1, 0) and
  the nearest one: that is monotonicity), extended to it;
- the secant through the two nearest computed orders above it, extended down to it.

An order whose bound plus offset cannot beat the best ε found is never computed. The result
is always the ε of an order that was computed, so it is an upper bound on the full
accountant's ε whatever happens; it equals it when the bounds hold, which they do for the
events admitted here (`prunable`): Gaussian and Poisson-sampled Gaussian releases and their
compositions, whose curves dp_accounting computes as the divergence of one fixed pair of
distributions. Other events (group privacy, shuffling, votes) take the full curve.
"""

from __future__ import annotations

import numpy as np

from dpfl.errors import AccountingError
from dpfl.privacy.accountants.rdp import event_rdp
from dpfl.privacy.conversion import conversion_offsets, kl_zero_threshold
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

__all__ = ["prunable", "pruned_epsilon"]

# Where the search starts: a spread of orders, then it refines towards the minimum.
_FIRST = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# Bounds extrapolated from dp_accounting's floating-point values: an order is skipped only
# when its bound clears the best ε by more than this (relative), so rounding cannot hide a
# minimum by more than a rounding error.
_SLACK = 1e-9


def prunable(event: Event) -> bool:
    """Returns whether the event's RDP curve is a divergence of fixed distributions (see above)."""
    if isinstance(event, GaussianEvent):
        return True
    if isinstance(event, PoissonSampledEvent):
        return isinstance(event.event, GaussianEvent)
    if isinstance(event, SelfComposedEvent):
        return prunable(event.event)
    if isinstance(event, ComposedEvent | ParallelEvent):
        return all(prunable(e) for e in event.events)
    return False


def pruned_epsilon(
    event: Event,
    *,
    delta: float,
    orders: tuple[float, ...],
    conversion: str = "tight",
    near: float | None = None,
) -> tuple[float, float]:
    """Returns min over `orders` of rdp(α) + offset(α) for a `prunable` event, and the α that gives it.

    Args:
        near: where the minimum is expected (the α a similar event's call returned): the search
            starts at the orders around it instead of a spread over the whole range.

    Raises:
        AccountingError: no order gives a finite ε.
    """
    grid = np.asarray(orders, dtype=float)
    if np.any(np.diff(grid) <= 0) or grid[0] <= 1:
        raise ValueError("`orders` must be increasing and > 1")
    offsets = conversion_offsets(grid, delta=delta, conversion=conversion)
    rdp = np.full(len(grid), np.nan)  # nan: not computed

    def compute(indices: np.ndarray) -> None:
        rdp[indices] = event_rdp(event, tuple(grid[indices].tolist()))

    first = _FIRST if near is None else (near,)
    start = np.clip(np.searchsorted(grid, first), 0, len(grid) - 1)
    if near is not None:
        start = np.clip(start + np.array([-1, 0, 1]), 0, len(grid) - 1)
    compute(np.unique(start))
    while True:
        eps = rdp + offsets
        best = np.nanmin(np.where(np.isnan(eps), np.inf, eps))
        candidates = np.flatnonzero(np.isnan(rdp) & (offsets < best))  # rdp ≥ 0: offset alone
        if not candidates.size:
            break
        bound = _lower_bounds(grid, rdp)[candidates] + offsets[candidates]
        if bound.min() >= best - _SLACK * max(1.0, abs(best)):
            break
        compute(candidates[[np.argmin(bound)]])  # the most promising order next
    if conversion == "tight":
        known = rdp[np.isfinite(rdp)]
        if known.size and known.min() < 1e-3:  # only then can the smallest order pass the KL test
            if np.isnan(rdp[0]):
                compute(np.array([0]))
            if rdp[0] < kl_zero_threshold(delta):
                return 0.0, float(grid[0])
    if not np.isfinite(best):
        raise AccountingError(
            f"rdp: no tracked RDP order gives a finite ε at δ={delta:g}; the releases are too weak for "
            "RDP accounting at these orders (try the pld accountant, or more noise)"
        )
    return max(float(best), 0.0), float(grid[np.nanargmin(np.where(np.isnan(eps), np.inf, eps))])


def _lower_bounds(grid: np.ndarray, rdp: np.ndarray) -> np.ndarray:
    """Returns a lower bound on rdp at every order from the finite computed ones (see the module doc)."""
    known = np.flatnonzero(np.isfinite(rdp))
    # h(α) = (α − 1)·rdp(α) at the computed orders, with the point (1, 0) in front
    xs = np.concatenate([[1.0], grid[known]])
    hs = np.concatenate([[0.0], (grid[known] - 1) * rdp[known]])
    pos = np.searchsorted(xs, grid)  # xs[pos − 1] < α ≤ xs[pos]; pos ≥ 1 since every α > 1
    n = len(xs)
    bound = np.zeros(len(grid))
    with np.errstate(divide="ignore", invalid="ignore"):
        # from below: the secant through the two nearest computed points under α
        a, b = np.maximum(pos - 2, 0), pos - 1
        below = np.where(a < b, hs[b] + (grid - xs[b]) * (hs[b] - hs[a]) / (xs[b] - xs[a]), 0.0)
        bound = np.maximum(bound, below)
        # from above: the secant through the two nearest computed points over α, extended down
        c, d = pos, pos + 1
        ok = d < n
        c, d = np.minimum(c, n - 1), np.minimum(d, n - 1)
        above = np.where(ok, hs[c] + (grid - xs[c]) * (hs[d] - hs[c]) / (xs[d] - xs[c]), 0.0)
        bound = np.maximum(bound, np.where(ok, above, 0.0))
    return bound / (grid - 1)

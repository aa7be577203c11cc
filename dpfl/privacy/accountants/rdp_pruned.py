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
accountant's ε whatever happens; it equals it when the bounds hold.

Only integer orders serve as anchors. At integer α dp_accounting computes the divergence of
the Poisson-sampled Gaussian pair exactly; at fractional α its series gives an upper bound,
which is not monotone nor convex (q = 0.3, σ = 10: rdp(1.9) = 0.0035 > rdp(2) = 0.0009), and
secants through such points once ruled out the true minimum. A bound from exact values bounds
the true divergence, hence also dp_accounting's larger value, at every order. The events
admitted (`prunable`) are Gaussian and Poisson-sampled Gaussian releases and their
compositions; others (group privacy, shuffling, votes) take the full curve.

The tight conversion's ε = 0 (some order with rdp below −log(1 − δ²)) is decided on every
order that could pass it: none can when Pinsker's inequality puts the KL divergence, below
every order's rdp, above the threshold (the usual case), and otherwise every order whose
bound is below it is computed.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from dpfl.errors import AccountingError
from dpfl.formats import number_text
from dpfl.privacy.accountants import rdp
from dpfl.privacy.accountants.base import accountant_class
from dpfl.privacy.accountants.rdp import DEFAULT_ORDERS, RDPAccountant, event_rdp
from dpfl.privacy.conversion import conversion_offsets, kl_zero_threshold
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

__all__ = [
    "applies",
    "cache_clear",
    "epsilon_at_order",
    "kl_floor",
    "prunable",
    "pruned_epsilon",
    "pruned_epsilon_curve",
    "pruned_epsilon_curves",
    "pruned_epsilons",
    "pruned_options",
    "remembered_epsilon_curve",
    "walked_epsilon",
]

# Where the search starts: a spread of orders, then it refines towards the minimum.
_FIRST = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# Bounds extrapolated from dp_accounting's floating-point values: an order is skipped only
# when its bound clears the best ε by more than this (relative), so rounding cannot hide a
# minimum by more than a rounding error.
_SLACK = 1e-9


def applies(accountant: str, events: Sequence[Event]) -> bool:
    """Returns whether `accountant`'s ε of `events` may come from here: the plain rdp accountant
    (not pate, whose data-dependent vote curves are not divergences) and `prunable` events."""
    return accountant_class(accountant) is RDPAccountant and all(prunable(e) for e in events)


def pruned_options(options: Mapping[str, object]) -> dict[str, object]:
    """Returns the rdp accountant's `orders` and `conversion` from its options, defaults filled in."""
    return {
        "orders": tuple(options.get("orders", DEFAULT_ORDERS)),  # type: ignore[arg-type]
        "conversion": options.get("conversion", "tight"),
    }


def kl_floor(event: Event) -> float:
    """Returns a lower bound on the KL divergence of a `prunable` event's pair (Pinsker: KL ≥ 2·TV²).

    TV of one Gaussian release of sensitivity 1 is 2Φ(1/(2σ)) − 1; Poisson sampling at rate q
    scales it by q; KL adds over composition and takes the maximum over parallel releases.
    """
    if isinstance(event, GaussianEvent):
        return 2 * math.erf(1 / (2 * math.sqrt(2) * event.noise_multiplier)) ** 2
    if isinstance(event, PoissonSampledEvent):
        tv = event.sampling_rate * math.erf(1 / (2 * math.sqrt(2) * event.event.noise_multiplier))
        return 2 * tv**2
    if isinstance(event, SelfComposedEvent):
        return event.count * kl_floor(event.event)
    if isinstance(event, ComposedEvent):
        return sum(kl_floor(e) for e in event.events)
    if isinstance(event, ParallelEvent):
        return max((kl_floor(e) for e in event.events), default=0.0)
    raise ValueError(f"no KL floor for {event.kind!r} events")


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
    return pruned_epsilons([event], delta=delta, orders=orders, conversion=conversion, near=near)[0]


def pruned_epsilons(
    events: Sequence[Event],
    *,
    delta: float,
    orders: tuple[float, ...],
    conversion: str = "tight",
    near: float | None = None,
) -> list[tuple[float, float]]:
    """Returns `pruned_epsilon` of each event, all searched as rows of one branch and bound.

    A calibration checks its silos' σ on the whole grid together (`parties._PartySearch`): their
    minima lie at nearly the same orders, so one search computes about the orders one of them
    needs, for all of them (issue 43). Each row's ε is the minimum over its computed orders, as
    alone, to 1e-9 relative (`pruned_epsilon_curves` says why).

    Raises:
        AccountingError: no order gives a finite ε for some event.
    """
    grid = _grid(orders)
    if near is None:
        start = _spread(grid)
    else:
        # the orders around it, and the integer orders around it: only those are anchors
        around = np.searchsorted(grid, [near, math.floor(near), math.floor(near) + 1, math.floor(near) + 2])
        start = np.clip(np.concatenate([around[:1] + np.array([-1, 0, 1]), around[1:]]), 0, len(grid) - 1)
    eps, best = _minimum(
        grid,
        lambda cols: np.stack([event_rdp(e, tuple(grid[cols].tolist())) for e in events]),
        rows=len(events),
        start=start,
        delta=delta,
        conversion=conversion,
        kl=np.array([kl_floor(e) for e in events]),
    )
    return [(float(e), float(grid[b])) for e, b in zip(eps, best, strict=True)]


def epsilon_at_order(event: Event, *, delta: float, order: float, conversion: str = "tight") -> float:
    """Returns ε from one RDP order's value alone: an upper bound on `pruned_epsilon`'s, which
    takes the minimum over every order (and equal to it where `order` holds that minimum)."""
    rdp = float(event_rdp(event, (float(order),))[0])
    offset = float(conversion_offsets(np.array([order]), delta=delta, conversion=conversion)[0])
    return max(rdp + offset, 0.0)


def walked_epsilon(
    event: Event, *, delta: float, near: float, orders: tuple[float, ...], conversion: str = "tight"
) -> tuple[float, float]:
    """Returns (ε, order) at a local minimum of ε over `orders`, walked to from the grid order
    nearest `near` one neighbour at a time: an upper bound on the whole grid's ε (that of one
    computed order), for the price of the orders walked. For any event with an RDP curve."""
    grid = np.asarray(orders, dtype=float)
    i = int(np.clip(np.searchsorted(grid, near), 0, len(grid) - 1))
    at = functools.partial(epsilon_at_order, event, delta=delta, conversion=conversion)
    eps = at(order=float(grid[i]))
    while True:
        best, j = min((at(order=float(grid[j])), j) for j in (i - 1, i + 1) if 0 <= j < len(grid))
        if not best < eps:
            return eps, float(grid[i])
        eps, i = best, j


def pruned_epsilon_curve(
    events: Sequence[Event],
    counts: np.ndarray,
    *,
    delta: float,
    orders: tuple[float, ...],
    conversion: str = "tight",
) -> np.ndarray:
    """Returns the cumulative ε after each round of a history of `prunable` events, from few orders.

    The same numbers as `RDPAccountant().epsilon_curve(events, counts, delta=delta)`: round r's
    curve is Σ_e (releases of e up to r)·rdp_e, a sum of divergence curves, so the bounds hold.
    Remembered by history: a run's projection and its final ledger, and the dashboard's every
    view of it, ask for the same history again.

    Args:
        events: the distinct events of the history.
        counts: [rounds, len(events)] how often each event was released in each round.

    Raises:
        AccountingError: no order gives a finite ε at some round.
    """
    return pruned_epsilon_curves([(events, counts)], delta=delta, orders=orders, conversion=conversion)[0]


def pruned_epsilon_curves(
    histories: Sequence[tuple[Sequence[Event], np.ndarray]],
    *,
    delta: float,
    orders: tuple[float, ...],
    conversion: str = "tight",
) -> list[np.ndarray]:
    """Returns `pruned_epsilon_curve` of each (events, counts) history, those not remembered searched
    together: every round of every history is a row of one branch and bound (`_minimum`).

    A federation's silos have different sampling rates and σ, but their rounds hold their minima
    at nearly the same orders, so the search computes about the orders one silo needs, for all of
    them at once: 25 silos' plans cost one search loop instead of 25 (issue 43). Each row's ε is
    the minimum over its computed orders, as alone; an order computed for another row can only
    lower it where the bounds hold it cannot (`_SLACK`), so each curve is the one computed alone
    to 1e-9 relative. Each is remembered under its own history.
    """
    keys = [_history_key(events, counts, delta, orders, conversion) for events, counts in histories]
    curves = {key: curve for key in keys if (curve := _remembered(key)) is not None}
    todo = list(dict.fromkeys(key for key in keys if key not in curves))
    if todo:
        computed = _curves(todo)
        with _LOCK:
            for key, curve in zip(todo, computed, strict=True):
                _CURVES[key] = curves[key] = curve
            while len(_CURVES) > _KEPT:
                _CURVES.popitem(last=False)
    return [curves[key].copy() for key in keys]


def remembered_epsilon_curve(
    events: Sequence[Event],
    counts: np.ndarray,
    *,
    delta: float,
    orders: tuple[float, ...],
    conversion: str = "tight",
) -> np.ndarray | None:
    """Returns `pruned_epsilon_curve` of the history if this process has computed it, else None
    (computing nothing)."""
    curve = _remembered(_history_key(events, counts, delta, orders, conversion))
    return None if curve is None else curve.copy()


# Curves by history, least recently used first; the API's threads share them.
_CURVES: OrderedDict[tuple, np.ndarray] = OrderedDict()
_KEPT = 4096
_LOCK = threading.Lock()


def _remembered(key: tuple) -> np.ndarray | None:
    with _LOCK:
        curve = _CURVES.get(key)
        if curve is not None:
            _CURVES.move_to_end(key)
    return curve


def _history_key(
    events: Sequence[Event], counts: np.ndarray, delta: float, orders: tuple[float, ...], conversion: str
) -> tuple:
    counts = np.ascontiguousarray(counts, dtype=float)
    return (tuple(events), counts.shape, counts.tobytes(), delta, tuple(orders), conversion)


def _curves(keys: Sequence[tuple]) -> list[np.ndarray]:
    """Returns the curve of each history key (`_history_key`; one δ, orders and conversion), all
    searched as rows of one `_minimum` over the union of their events."""
    delta, orders, conversion = keys[0][3:]
    column: dict[Event, int] = {}
    for key in keys:
        for event in key[0]:
            column.setdefault(event, len(column))
    events = list(column)
    blocks = []
    for own, shape, counts, *_ in keys:
        block = np.zeros((shape[0], len(events)))
        block[:, [column[e] for e in own]] = np.cumsum(np.frombuffer(counts).reshape(shape), axis=0)
        blocks.append(block)
    eps = _curve(events, np.concatenate(blocks), delta=delta, orders=orders, conversion=conversion)
    return np.split(eps, np.cumsum([key[1][0] for key in keys])[:-1])


def _curve(
    events: Sequence[Event],
    totals: np.ndarray,
    *,
    delta: float,
    orders: tuple,
    conversion: str,
) -> np.ndarray:
    """Returns the ε of each row of `totals` ([rows, events] releases of each event so far)."""
    grid = _grid(orders)

    def fill(cols: np.ndarray) -> np.ndarray:
        key = tuple(grid[cols].tolist())
        per_event = np.stack([event_rdp(e, key) for e in events]) if events else np.zeros((0, len(cols)))
        infinite = np.isinf(per_event)  # an order where an event has no bound (0 × inf must stay 0)
        out = totals @ np.where(infinite, 0.0, per_event)
        out[(totals @ infinite) > 0] = np.inf
        return out

    kl = totals @ np.array([kl_floor(e) for e in events]) if events else np.zeros(len(totals))
    eps, _ = _minimum(
        grid, fill, rows=len(totals), start=_spread(grid), delta=delta, conversion=conversion, kl=kl
    )
    return eps


def cache_clear() -> None:
    """Forgets every remembered curve and RDP value (benchmarks time the cold path with it)."""
    with _LOCK:
        _CURVES.clear()
    rdp.cache_clear()


def _grid(orders: tuple[float, ...]) -> np.ndarray:
    grid = np.asarray(orders, dtype=float)
    if np.any(np.diff(grid) <= 0) or grid[0] <= 1:
        raise ValueError("`orders` must be increasing and > 1")
    return grid


def _spread(grid: np.ndarray) -> np.ndarray:
    return np.unique(np.clip(np.searchsorted(grid, _FIRST), 0, len(grid) - 1))


def _minimum(
    grid: np.ndarray,
    fill: Callable[[np.ndarray], np.ndarray],
    *,
    rows: int,
    start: np.ndarray,
    delta: float,
    conversion: str,
    kl: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns each row's min over the grid of curve(α) + offset(α), and the index of its α.

    `fill(cols)` computes every row's curve at the grid columns `cols` ([rows, len(cols)]);
    columns are computed for all rows at once, the most promising ones first, until no
    uncomputed column's lower bound beats any row's best. `kl` is each row's `kl_floor`.
    """
    offsets = conversion_offsets(grid, delta=delta, conversion=conversion)
    values = np.full((rows, len(grid)), np.nan)  # nan: not computed
    computed = np.zeros(len(grid), dtype=bool)

    def compute(cols: np.ndarray) -> None:
        values[:, cols] = fill(cols)
        computed[cols] = True

    compute(np.unique(start))
    # A row is settled once no uncomputed column can beat its best: more columns only raise the
    # bounds (secants through nearer points of a convex function) and lower the best, so it
    # stays settled and later rounds of the search look at the open rows only.
    open_rows = np.arange(rows)
    while open_rows.size:
        sub = values[open_rows]
        best = np.where(computed, sub + offsets, np.inf).min(axis=1)
        # rdp ≥ 0: a column whose offset alone is above every open row's best is out
        candidates = np.flatnonzero(~computed & (offsets < best.max()))
        if not candidates.size:
            break
        bound = _lower_bounds(grid, sub, computed, candidates) + offsets[candidates]
        with np.errstate(invalid="ignore"):  # a row with no finite ε yet: every bound beats it
            beats = (
                bound
                < np.where(np.isinf(best), np.inf, best - _SLACK * np.maximum(1.0, np.abs(best)))[:, None]
            )
        still = beats.any(axis=1)
        open_rows, beats, bound = open_rows[still], beats[still], bound[still]
        if open_rows.size:  # each open row's most promising column next
            compute(np.unique(candidates[np.argmin(np.where(beats, bound, np.inf), axis=1)]))
    eps = np.where(computed, values + offsets, np.inf)
    best, where = eps.min(axis=1), eps.argmin(axis=1)
    if conversion == "tight":
        # The KL test (ε = 0): no order's rdp is below the KL divergence, so a row whose KL
        # floor clears the threshold cannot pass it; for the others, compute every order whose
        # bound is below the threshold, then test every computed one.
        threshold = kl_zero_threshold(delta)
        maybe = kl < threshold
        if maybe.any() and (~computed).any():
            cols = np.flatnonzero(~computed)
            low = (_lower_bounds(grid, values[maybe], computed, cols) < threshold).any(axis=0)
            if low.any():
                compute(cols[low])
        passes = maybe[:, None] & computed & (np.where(np.isnan(values), np.inf, values) < threshold)
        zero = passes.any(axis=1)
        best, where = np.where(zero, 0.0, best), np.where(zero, np.argmax(passes, axis=1), where)
    if not np.all(np.isfinite(best)):
        raise AccountingError(
            f"rdp: no tracked RDP order gives a finite ε at δ = {number_text(delta)}; "
            "the releases are too weak for "
            "RDP accounting at these orders (try the pld accountant, or more noise)"
        )
    return np.maximum(best, 0.0), where


def _lower_bounds(grid: np.ndarray, values: np.ndarray, computed: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Returns a lower bound on each row's curve at the columns `cols`, from its computed columns.

    See the module doc; a secant through a column where a row's value is not finite gives that
    row no bound there. Shape [rows, len(cols)].
    """
    known = np.flatnonzero(computed & (grid == np.round(grid)))  # exact values only (module doc)
    # h(α) = (α − 1)·curve(α) at the computed integer orders, with the point (1, 0) in front
    xs = np.concatenate([[1.0], grid[known]])
    hs = np.concatenate([np.zeros((len(values), 1)), (grid[known] - 1) * values[:, known]], axis=1)
    at = grid[cols]
    pos = np.searchsorted(xs, at)  # xs[pos − 1] < α ≤ xs[pos]; pos ≥ 1 since every α > 1
    n = len(xs)
    with np.errstate(divide="ignore", invalid="ignore"):
        # from below: the secant through the two nearest computed points under α
        a, b = np.maximum(pos - 2, 0), pos - 1
        below = hs[:, b] + (at - xs[b]) * (hs[:, b] - hs[:, a]) / np.where(a < b, xs[b] - xs[a], 1.0)
        below = np.where(a < b, below, 0.0)
        # from above: the secant through the two nearest computed points over α, extended down
        c, d = np.minimum(pos, n - 1), np.minimum(pos + 1, n - 1)
        above = hs[:, c] + (at - xs[c]) * (hs[:, d] - hs[:, c]) / np.where(c < d, xs[d] - xs[c], 1.0)
        above = np.where(pos + 1 < n, above, 0.0)
        bound = np.maximum(np.where(np.isfinite(below), below, 0.0), np.where(np.isfinite(above), above, 0.0))
    return np.maximum(bound, 0.0) / (at - 1)

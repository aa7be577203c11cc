"""One σ for every party: the one the least private party needs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dpfl.errors import SpecError
from dpfl.privacy.calibration.remembered import RESULTS, remember, result_key
from dpfl.privacy.calibration.target import (
    CHECKED,
    Schedule,
    Target,
    as_party_list,
    check_target,
    gap_at,
    meets,
    on_exact_orders,
    probe_schedule,
)
from dpfl.privacy.calibration.walk import Walk
from dpfl.privacy.events import Event
from dpfl.privacy.rootfind import Shape


def calibrate_noise_multiplier(
    make_events: Callable[[float], Event | Sequence[Event]],
    *,
    target_epsilon: float,
    target_delta: float,
    accountant: str = "rdp",
    rtol: float = 1e-4,
    **options,
) -> float:
    """Returns the smallest σ (to relative `rtol`) whose releases meet (target_epsilon, target_delta).

    With several parties, the search runs on the least private party only (found at a first
    guess), and the result is then checked on every party; if another party is now the least
    private, the search repeats on it. So a run of 25 silos costs about one silo's calibration.

    Args:
        make_events: σ ↦ the events of each party under that noise multiplier.
        target_epsilon: ε > 0 to meet.
        target_delta: δ in (0, 1).
        accountant: registered accountant name.

    Raises:
        SpecError: the target cannot be met with σ ≤ 1e5.
    """
    check_target(target_epsilon)
    parties = as_party_list(make_events)
    probe_sigma, probe = probe_schedule(parties)
    target = Target(epsilon=target_epsilon, delta=target_delta, accountant=accountant, options=options)
    target = target.releasing(probe)
    key = result_key("one", (probe, parties(2 * probe_sigma)), (), target, rtol)
    if (known := RESULTS.get(key)) is not None:
        return known
    rough = on_exact_orders(calibrate_noise_multiplier, target, probe, make_events, rtol=rtol)
    x0 = 0.0 if rough is None else math.log(rough)
    return remember(key, math.exp(_search_least_private(parties, target, x0, rtol)))


def _search_least_private(parties: Schedule, target: Target, x: float, rtol: float) -> float:
    """Returns the log σ found for the least private party at it, once every party meets the target there.

    The least private party at x is searched; if another party fails the target at the σ
    found, it is searched next, from there.

    Events the rdp accountant cannot prune (group privacy: each order's value is the inner
    curve's at 2^c times that order, hundreds of integer terms) are searched on few orders: at
    each step, ε at a local minimum over the grid, walked to from the party's last one
    (`Walk`). Any order's ε bounds the whole grid's from above, so the σ found meets the target;
    the whole grid then accounts σ/(1 + max(rtol, 1e-3)), and if that still meets it (the walk
    stopped at a minimum that is not the grid's), the search goes on from there on the grid.
    """
    shape = Shape()
    walk = Walk.of(target, parties(math.exp(x)))
    gaps = _gaps(parties, target, x, walk=walk)
    while True:
        worst = max(range(len(gaps)), key=gaps.__getitem__)
        f = gap_at(parties, target, worst, walk=walk)
        try:
            x, shape = target.solve(f, x, f0=gaps[worst], shape=shape, rtol=rtol)
        except SpecError:
            if walk is None:
                raise
            walk = None  # no walked order reaches the target: the whole grid decides
            gaps = _gaps(parties, target, x)
            continue
        # ε falls with σ, so each repeat moves to a larger σ and visits a party at most once.
        if walk is None:
            gaps = _gaps(parties, target, x)
            if max(gaps) <= 0:
                return x
            continue
        if not meets(target, parties(math.exp(x))):  # the worst one is met (a walked bound)
            gaps = _gaps(parties, target, x, walk=walk)
            continue
        below = x - math.log1p(max(rtol, CHECKED))
        gaps = _gaps(parties, target, below)
        if max(gaps) > 0:
            return x
        x, walk = below, None


def _gaps(parties: Schedule, target: Target, x: float, *, walk: Walk | None = None) -> list[float]:
    """Returns every party's gap at σ = eˣ (walked, if `walk`); [+∞] where the schedule refuses σ."""
    events = parties(math.exp(x))
    if events is None:
        return [math.inf]
    return [target.gap(e) if walk is None else walk.gap(e, i) for i, e in enumerate(events)]

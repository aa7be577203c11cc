"""Rényi-DP accountants: `rdp` (dp_accounting's RDP) and `pate` (with data-dependent votes).

An event's RDP curve ε(α) over a fixed grid of orders is computed once per distinct event
(cached), so composing the same release 100,000 times costs one curve and a sum. Curves of
events dp_accounting knows come from `dp_accounting.rdp.RdpAccountant`; this module adds
only what it lacks:

- GroupEvent (Mironov 2017, Prop. 2; reference/004_uldp_fl.md §3.1 Lemma 9): if M is
  (α, ε(α))-RDP then for groups of k ≤ 2^c units it is (α/2^c, 3^c·ε(α))-RDP for α ≥ 2^{c+1}.
  A k that is not a power of two uses c = ⌈log₂ k⌉, which covers it (a 2^c-stable bound
  holds for every smaller group); it is never refused or reported as 0.
- ShuffleEvent: the Rényi divergence of the Feldman–McMillan–Talwar dominating pair.
- VoteEvent under `pate`: PATE 2018 Theorem 6, never above the data-independent bound.

SampledWithoutReplacementEvent goes to dp_accounting under its only relation, replace-one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from dpfl.errors import AccountingError
from dpfl.formats import number_text
from dpfl.privacy import gnmax, shuffle
from dpfl.privacy.accountants.base import ACCOUNTANTS, Accountant, Unsupported
from dpfl.privacy.conversion import CONVERSIONS, rdp_to_epsilon
from dpfl.privacy.dpa import NeighboringRelation
from dpfl.privacy.dpa import RdpAccountant as _DpaRdp
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GroupEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffleEvent,
    VoteEvent,
    to_dp_accounting,
)

__all__ = [
    "DEFAULT_ORDERS",
    "PATEAccountant",
    "RDPAccountant",
    "cache_clear",
    "computed_orders",
    "event_rdp",
    "remember_orders",
]

# dp_accounting's default orders, denser at the large end so that group privacy (orders ×2^c)
# and long compositions of weak noise still find their optimum.
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)]
    + list(range(11, 64))
    + [80, 100, 128, 160, 200, 256, 384, 512, 1024]
)


@functools.lru_cache(maxsize=65536)
def event_rdp(event: Event, orders: tuple[float, ...], data_dependent: bool = False) -> np.ndarray:
    """Returns the RDP curve of one event at `orders` (read-only; cached per distinct event).

    Raises:
        Unsupported: the event (or a sub-event) has no RDP bound here.
    """
    curve = _curve(event, np.asarray(orders, dtype=float), data_dependent)
    curve.setflags(write=False)
    return curve


def _curve(event: Event, orders: np.ndarray, data_dependent: bool) -> np.ndarray:
    # Sub-events go through the cache too: a run's composed history repeats a few events.
    key = tuple(orders.tolist())
    if isinstance(event, SelfComposedEvent):
        return event.count * event_rdp(event.event, key, data_dependent)
    if isinstance(event, ComposedEvent):
        total = np.zeros_like(orders)
        for sub in event.events:
            total = total + event_rdp(sub, key, data_dependent)
        return total
    if isinstance(event, ParallelEvent):
        return np.max([event_rdp(sub, key, data_dependent) for sub in event.events], axis=0)
    if isinstance(event, VoteEvent) and data_dependent and event.counts is not None:
        return gnmax.gnmax_rdp(orders, event.counts, noise_std=event.noise_std, sensitivity=event.sensitivity)
    if isinstance(event, ShuffleEvent):
        return shuffle.shuffle_rdp(
            orders=orders, local_epsilon=event.local_epsilon, num_users=event.num_users
        )
    if isinstance(event, GroupEvent):
        c = math.ceil(math.log2(event.group_size)) if event.group_size > 1 else 0
        if c == 0:
            return _curve(event.event, orders, data_dependent)
        usable = orders >= 2
        out = np.full_like(orders, np.inf)
        out[usable] = 3**c * _curve(event.event, orders[usable] * 2**c, data_dependent)
        return out
    dpa_event = to_dp_accounting(event)
    if dpa_event is None:
        if isinstance(event, PoissonSampledEvent):
            raise Unsupported(event, f"Poisson sampling of a {event.event.kind!r} event has no RDP bound")
        raise Unsupported(event, "no RDP bound for this event kind")
    known = _orders_of(event)
    missing = [a for a in key if a not in known]
    if missing:
        relation = _relation(event)
        accountant = (
            _DpaRdp(orders=missing)
            if relation is NeighboringRelation.ADD_OR_REMOVE_ONE
            else _DpaRdp(orders=missing, neighboring_relation=relation)
        )
        if not accountant.supports(dpa_event):
            raise Unsupported(event, "dp_accounting's RDP accountant does not support it")
        accountant.compose(dpa_event)
        known.update(zip(missing, accountant.rdp.tolist(), strict=True))
    return np.array([known[a] for a in key])


def _relation(event: Event) -> NeighboringRelation:
    """Returns the relation dp_accounting accounts `event` under: replace-one for sampling without
    replacement (its only relation there), add-or-remove otherwise. The RDP of a Gaussian is the
    same under both (its σ is in units of the relation's sensitivity)."""
    if isinstance(event, SampledWithoutReplacementEvent):
        return NeighboringRelation.REPLACE_ONE
    return NeighboringRelation.ADD_OR_REMOVE_ONE


@functools.lru_cache(maxsize=16384)
def _orders_of(event: Event) -> dict[float, float]:
    """Returns the RDP values of one event dp_accounting computes, by order, as far as computed.

    dp_accounting computes each order on its own, so a value does not depend on which other
    orders were asked with it. Calibration, a run's planned ε per round and its ledger's ε at its
    records each ask for a different handful of orders of the same events (`rdp_pruned`): each
    order of an event is computed once. Fractional orders cost up to a few ms each.
    """
    return {}


def computed_orders(events: Iterable[Event]) -> list[tuple[Event, dict[float, float]]]:
    """Returns the RDP values dp_accounting has computed in this process for the events it
    accounts within `events` (their leaves: Gaussian, Poisson-sampled Gaussian, ...), by order."""
    leaves: dict[Event, None] = {}
    stack = list(events)
    while stack:
        event = stack.pop()
        if isinstance(event, ComposedEvent | ParallelEvent):
            stack.extend(event.events)
        elif isinstance(event, SelfComposedEvent | GroupEvent):
            stack.append(event.event)
        else:
            leaves[event] = None
    return [(e, dict(known)) for e in leaves if (known := _orders_of(e))]


def remember_orders(computed: Iterable[tuple[Event, Mapping[float, float]]]) -> None:
    """Takes RDP values that dp_accounting computed for these exact events (`computed_orders`, in
    another process of the same code and versions: `dpfl.privacy.calibration.stored`) as if
    computed here: the accountant asks dp_accounting only for the orders not among them."""
    for event, values in computed:
        _orders_of(event).update(values)


def cache_clear() -> None:
    """Forgets every remembered RDP value (benchmarks time the cold path with it)."""
    event_rdp.cache_clear()
    _orders_of.cache_clear()


@ACCOUNTANTS.register("rdp")
class RDPAccountant(Accountant):
    """Rényi DP (Mironov 2017) via dp_accounting; votes accounted data-independently.

    Args:
        orders: RDP orders α > 1 to track.
        conversion: "tight" (Balle et al. 2020, the default) or "classic" (Mironov 2017).
    """

    description = "Rényi DP (dp_accounting); group privacy by Mironov's Prop. 2; numerical shuffle bound"
    data_dependent = False

    def __init__(self, *, orders: Sequence[float] = DEFAULT_ORDERS, conversion: str = "tight"):
        super().__init__()
        if conversion not in CONVERSIONS:
            raise ValueError(f"`conversion` must be one of {', '.join(CONVERSIONS)}; got {conversion!r}.")
        self.orders = tuple(float(a) for a in orders)
        self.conversion = conversion
        self.rdp = np.zeros(len(self.orders))

    def curve(self, event: Event) -> np.ndarray:
        """Returns the event's RDP curve at this accountant's orders (cached)."""
        try:
            return event_rdp(event, self.orders, self.data_dependent)
        except Unsupported:
            raise
        except ValueError as exc:  # dp_accounting refuses out-of-range parameters
            raise Unsupported(event, str(exc)) from None

    def _check(self, event: Event) -> None:
        self.curve(event)

    def _compose(self, event: Event, count: int) -> None:
        self.rdp = self.rdp + count * self.curve(event)

    def epsilon(self, delta: float) -> float:
        """Returns ε at δ, minimised over the tracked orders."""
        return float(
            self._finite(
                rdp_to_epsilon(np.asarray(self.orders), self.rdp, delta=delta, conversion=self.conversion),
                delta,
            )
        )

    def epsilon_curve(self, events: Sequence[Event], counts: np.ndarray, *, delta: float) -> np.ndarray:
        """Returns cumulative ε per round: counts × cached curves, a cumulative sum, one conversion."""
        self._require(events)
        curves = np.stack([self.curve(e) for e in events]) if events else np.zeros((0, len(self.orders)))
        infinite = np.isinf(curves)  # orders where an event gives no bound (0 × inf must not be nan)
        per_round = counts @ np.where(infinite, 0.0, curves)
        per_round[(counts @ infinite) > 0] = np.inf
        cumulative = self.rdp + np.cumsum(per_round, axis=0)
        if len(counts):
            self.rdp = cumulative[-1].copy()
        eps = rdp_to_epsilon(np.asarray(self.orders), cumulative, delta=delta, conversion=self.conversion)
        return self._finite(eps, delta)

    def _finite(self, eps: np.ndarray, delta: float) -> np.ndarray:
        if np.any(~np.isfinite(eps)):
            raise AccountingError(
                f"{self.name}: no tracked RDP order gives a finite ε at δ = {number_text(delta)}; "
                "the releases are too "
                "weak for RDP accounting at these orders (try the pld accountant, or more noise)"
            )
        return eps


@ACCOUNTANTS.register("pate")
class PATEAccountant(RDPAccountant):
    """RDP with the data-dependent GNMax bound for votes that recorded their histogram.

    The data-dependent ε depends on the private votes, so it is itself not a DP release:
    publish it only with that caveat (PATE 2018 §4 adds smooth-sensitivity noise for that).
    """

    description = "RDP with the data-dependent PATE/GNMax bound for votes (PATE 2018, Thm 6)"
    data_dependent = True

    def __init__(self, *, orders: Sequence[float] = DEFAULT_ORDERS, conversion: str = "tight"):
        super().__init__(orders=orders, conversion=conversion)
        self._note("data-dependent: the ε depends on the private vote histograms")

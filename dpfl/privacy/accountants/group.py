"""Group privacy for ULDP-GROUP-k: the better of two sound routes (reference/004_uldp_fl.md §3).

A user who owns up to k records is protected by a record-level mechanism only through group
privacy. Two valid bounds, both computed from the same record-level RDP curve:

1. RDP route (Mironov 2017, Prop. 2): (α/2^c, 3^c·ε(α))-RDP for k ≤ 2^c, then the tight
   RDP → DP conversion. This is what `rdp` does with a GroupEvent.
2. DP route (Kamath 2020; the paper's Lemma 8): (ε′, δ′)-DP implies (kε′, k·e^{(k−1)ε′}·δ′)-DP
   for groups of k. The authors binary-search δ′ so that k·e^{(k−1)ε′}δ′ = δ, which they
   found numerically unstable for large k and clamped at k = 62. Here ε′(δ′) is evaluated for
   a dense grid of log δ′ in one vectorised conversion and every feasible point (group δ ≤ δ,
   checked exactly) is a valid bound; the smallest kε′ is reported. Any k works.

`epsilon` reports the smaller of the two; `routes` reports both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpfl.errors import AccountingError
from dpfl.formats import number_text
from dpfl.privacy.accountants.base import ACCOUNTANTS, Accountant, Unsupported
from dpfl.privacy.accountants.rdp import DEFAULT_ORDERS, RDPAccountant
from dpfl.privacy.conversion import rdp_to_epsilon
from dpfl.privacy.events import ComposedEvent, Event, GroupEvent, SelfComposedEvent

__all__ = ["GroupAccountant", "describe_group_conversion", "group_dp_route_epsilon"]


def group_dp_route_epsilon(
    orders: np.ndarray, record_rdp: np.ndarray, *, group_size: int, delta: float
) -> float:
    """Returns min kε′(δ′) over δ′ with k·e^{(k−1)ε′}·δ′ ≤ δ (Lemma 8), or +inf if none is feasible.

    Args:
        orders: RDP orders of `record_rdp`.
        record_rdp: the record-level composed RDP curve.
        group_size: k ≥ 1.
        delta: the group-level target δ.
    """
    k = group_size
    if k == 1:
        return float(rdp_to_epsilon(orders, record_rdp, delta=delta))
    # δ′ ranges from δ/k (ε′ = 0 feasible only if the mechanism were perfect) down to e^{-1e5}.
    log_top = math.log(delta) - math.log(k)
    offsets = np.concatenate([[0.0], np.geomspace(1e-4, 1e5, 3000)])
    best = math.inf
    for _ in range(2):  # a coarse grid, then a fine one around its best point
        log_dp = log_top - offsets
        eps_rec = _eps_at_log_delta(orders, record_rdp, log_dp)
        feasible = math.log(k) + (k - 1) * eps_rec + log_dp <= math.log(delta) * (1 + 1e-12)
        if not np.any(feasible):
            return math.inf
        candidates = np.where(feasible, k * eps_rec, np.inf)
        i = int(np.argmin(candidates))
        best = min(best, float(candidates[i]))
        lo, hi = offsets[max(i - 1, 0)], offsets[min(i + 1, len(offsets) - 1)]
        offsets = np.linspace(lo, hi, 400)
    return best


def _eps_at_log_delta(orders: np.ndarray, rdp: np.ndarray, log_delta: np.ndarray) -> np.ndarray:
    # The tight conversion of conversion.rdp_to_epsilon written with log δ, vectorised over many
    # δ′ (some below float range). Its KL clause is left out: it only ever lowers ε.
    orders = orders[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        eps = np.where(
            orders > 1.01,
            rdp[None, :] + np.log1p(-1 / orders) - (log_delta[:, None] + np.log(orders)) / (orders - 1),
            np.inf,
        )
    eps = np.where(np.isnan(eps), np.inf, eps)
    return np.maximum(eps.min(axis=1), 0.0)


@ACCOUNTANTS.register("group")
class GroupAccountant(Accountant):
    """Group privacy: the smaller of Mironov's RDP route and the (ε, δ) route, for GroupEvents.

    Every event must be a GroupEvent with the same group size, alone or composed (the ledger
    of one ULDP-GROUP-k party).
    """

    description = "group privacy (ULDP-GROUP-k): min of the RDP route (Mironov) and the DP route (Lemma 8)"

    def __init__(self, *, orders: Sequence[float] = DEFAULT_ORDERS):
        super().__init__()
        self._group = RDPAccountant(orders=orders)
        self._record = RDPAccountant(orders=orders)
        self.group_size: int | None = None

    def _check(self, event: Event) -> None:
        if isinstance(event, SelfComposedEvent):
            return self._check(event.event)
        if isinstance(event, ComposedEvent):
            for sub in event.events:
                self._check(sub)
            return None
        if not isinstance(event, GroupEvent):
            raise Unsupported(event, "the group accountant takes GroupEvents only")
        if self.group_size is not None and event.group_size != self.group_size:
            raise Unsupported(
                event, f"group size {event.group_size} differs from {self.group_size} already composed"
            )
        self._record.curve(event.event)

    def _compose(self, event: Event, count: int) -> None:
        if isinstance(event, SelfComposedEvent):
            return self._compose(event.event, count * event.count)
        if isinstance(event, ComposedEvent):
            for sub in event.events:
                self._compose(sub, count)
            return None
        assert isinstance(event, GroupEvent)
        self.group_size = event.group_size
        self._record.compose(event.event, count)
        if self._group.supports(event):
            self._group.compose(event, count)
        else:  # the RDP route has no finite curve; only the DP route answers
            self._group.rdp = self._group.rdp + np.inf

    def routes(self, delta: float) -> dict[str, float]:
        """Returns ε of each route at δ: {"rdp": ..., "dp": ...} (+inf where a route gives no bound)."""
        if self.group_size is None:
            return {"rdp": 0.0, "dp": 0.0}
        orders = np.asarray(self._record.orders)
        rdp_route = float(rdp_to_epsilon(orders, self._group.rdp, delta=delta))
        dp_route = group_dp_route_epsilon(orders, self._record.rdp, group_size=self.group_size, delta=delta)
        return {"rdp": rdp_route, "dp": dp_route}

    def epsilon(self, delta: float) -> float:
        """Returns the smaller route's ε; raises AccountingError if neither is finite."""
        eps = min(self.routes(delta).values())
        if not math.isfinite(eps):
            raise AccountingError(
                f"group: neither route bounds groups of {self.group_size} at δ = {number_text(delta)}"
            )
        return eps


def describe_group_conversion(party_events: dict[str, Event], *, delta: float, accountant: str) -> str | None:
    """Returns which group-privacy conversion gave the ledger's ε, or None without GroupEvents.

    Args:
        party_events: each party's composed events (`Ledger.party_events()`).
        delta: the run's δ.
        accountant: the run's accountant name.
    """
    groups = [e for e in _leaves(list(party_events.values())) if isinstance(e, GroupEvent)]
    if not groups:
        return None
    k = max(e.group_size for e in groups)
    c = math.ceil(math.log2(k)) if k > 1 else 0
    rdp_route = f"the RDP route (Mironov 2017, Prop. 2) with k = {k} rounded up to 2^{c} = {2**c}"
    if accountant != "group":
        return f"group privacy for k = {k}: {rdp_route}"
    routes = {"rdp": 0.0, "dp": 0.0}
    for event in party_events.values():
        acc = GroupAccountant()
        acc.compose(event)
        routes = {name: max(routes[name], eps) for name, eps in acc.routes(delta).items()}
    chosen = rdp_route if routes["rdp"] <= routes["dp"] else f"the (ε, δ) route (Lemma 8) with k = {k}"
    return (
        f"group privacy for k = {k}: {chosen} (RDP route ε = {routes['rdp']:.4g}, "
        f"(ε, δ) route ε = {routes['dp']:.4g}; the smaller is reported)"
    )


def _leaves(events: list[Event]) -> list[Event]:
    out = []
    for event in events:
        out.append(event)
        if isinstance(event, GroupEvent):
            continue
        inner = getattr(event, "events", None) or ([event.event] if hasattr(event, "event") else [])
        out.extend(_leaves(list(inner)))
    return out

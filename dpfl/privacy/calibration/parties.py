"""Each party its own σ: the smallest that makes its own ledger meet the target."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpfl.errors import AccountingError
from dpfl.privacy.accountants import rdp_pruned
from dpfl.privacy.calibration.remembered import RESULTS, remember, result_key
from dpfl.privacy.calibration.target import (
    CHECKED,
    PartySchedule,
    Target,
    check_target,
    gap_at,
    meets,
    on_exact_orders,
    probe_schedule,
    refused_as_none,
)
from dpfl.privacy.events import Event
from dpfl.privacy.rootfind import Bracket, Shape


def calibrate_party_noise_multipliers(
    make_events: Callable[[float | np.ndarray], Mapping[str, Event]],
    *,
    parties: Sequence[str],
    target_epsilon: float,
    target_delta: float,
    accountant: str = "rdp",
    rtol: float = 1e-4,
    **options,
) -> float | np.ndarray:
    """Returns each listed party's own smallest σ meeting the target on its ledger, to relative
    `rtol` (under the rdp accountant, max(rtol, 1e-3) for all but the first schedule).

    `make_events(σ)` gives every party's composed events, for one σ for all or an array with
    one σ per listed party, in order. A party's events must depend on its own σ only (checked
    at the end: every party's events under the returned σ meet the target).

    Parties with equal events at σ = 1 share one search. The first schedule is searched from
    σ = 1 exactly as `calibrate_noise_multiplier` does; the others then start from its σ and
    the parabola fitted to its search, in lockstep, so each step of all of them costs one
    `make_events` call (a run's plan) plus one accountant evaluation per schedule. A listed
    party that never releases gets the largest σ found (it is never used).

    Returns:
        One float when every listed party gets the same σ (a homogeneous federation: then it
        is the value `calibrate_noise_multiplier` returns), else σ per listed party, in order.

    Raises:
        SpecError: the target cannot be met with σ ≤ 1e5 for some party.
        AccountingError: a party's events depend on other parties' σ.
    """
    check_target(target_epsilon)
    events_at = refused_as_none(make_events)
    probe_sigma, probe = probe_schedule(events_at)
    target = Target(epsilon=target_epsilon, delta=target_delta, accountant=accountant, options=options)
    target = target.releasing(probe.values())
    key = result_key("parties", (probe, events_at(2 * probe_sigma)), tuple(parties), target, rtol)
    if (known := RESULTS.get(key)) is not None:
        return known.copy() if isinstance(known, np.ndarray) else known
    if stray := sorted(set(probe) - set(parties)):
        raise ValueError(f"parties {stray} release events but are not listed in `parties`")
    # each schedule's search starts at its σ on the exact (integer) orders, when that pays
    rough = on_exact_orders(
        calibrate_party_noise_multipliers,
        target,
        list(probe.values()),
        make_events,
        rtol=rtol,
        parties=parties,
    )
    out = _PartySearch(events_at, parties, target, rtol, _group_equal(probe)).run(rough)
    if not meets(target, events_at(out)):
        raise AccountingError(
            "per-party calibration: a party's releases depend on other parties' noise, so each "
            "cannot be calibrated on its own; calibrate one σ for all instead"
        )
    return remember(key, float(out[0]) if len(out) and np.all(out == out[0]) else out)


def _group_equal(probe: Mapping[str, Event]) -> dict[Event, list[str]]:
    """Returns the parties by their events at the probe σ: each group needs one search."""
    groups: dict[Event, list[str]] = {}
    for party, event in probe.items():
        groups.setdefault(event, []).append(party)
    return groups


@dataclass
class _PartySearch:
    """The searches of one per-party calibration: each group of equal schedules is searched once.

    σ are handled as x = log σ throughout; `solved` holds each searched party's result.
    """

    events_at: PartySchedule
    parties: Sequence[str]  # the listed parties, in the order of make_events' σ array
    target: Target
    rtol: float
    groups: dict[Event, list[str]]  # releasing parties by their events at the probe σ
    solved: dict[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # each releasing party takes the σ of its group's first member (until found to differ)
        self.leader = {p: members[0] for members in self.groups.values() for p in members}
        # a search step may account one RDP order alone (`_in_lockstep`)
        self.pinnable = rdp_pruned.applies(self.target.accountant, list(self.groups))

    def run(self, rough: float | np.ndarray | None) -> np.ndarray:
        """Returns σ per listed party; `rough` is the result on the exact orders (starts), if any."""
        first, *others = [members[0] for members in self.groups.values()]
        start = self._starts(rough, [first, *others])
        x1, shape = self._alone(first, start.get(first, 0.0), Shape())
        self.solved[first] = x1
        self._in_lockstep({p: start.get(p, x1) for p in others}, shape, idle=x1)
        self._split_groups(shape, idle=x1)
        return self._sigmas(self.solved, idle=max(self.solved.values()))

    def _starts(self, rough: float | np.ndarray | None, searched: list[str]) -> dict[str, float]:
        """Returns log σ by searched party from the exact orders' result; {} without one."""
        if rough is None:
            return {}
        rough = np.broadcast_to(np.asarray(rough, dtype=float), (len(self.parties),))
        position = {p: i for i, p in enumerate(self.parties)}
        return {p: math.log(rough[position[p]]) for p in searched}

    def _alone(self, party: str, x0: float, shape: Shape) -> tuple[float, Shape]:
        """Searches one party from x0, one make_events call per step; returns (x, fitted shape)."""
        return self.target.solve(gap_at(self.events_at, self.target, party), x0, shape=shape, rtol=self.rtol)

    def _in_lockstep(self, starts: Mapping[str, float], shape: Shape, idle: float) -> None:
        """Searches each party of `starts` from its start, all at once: one make_events call a step.

        Under the rdp accountant a step accounts each party at one RDP order, the one that held
        the first party's minimum: one fractional order costs what the whole grid's branch and
        bound spends on each of the ~12 it computes. ε there bounds the whole accountant's from
        above, so the bracket's hi meets the target. The whole grid then accounts σ = hi/(1 +
        max(rtol, 1e-3)): above the target, the search is over (the guarantee); if not, another
        order's root lies lower, and the search goes on below that σ on the order holding the
        minimum there (after two orders, on the whole grid). Neighbouring orders' roots differ
        by 3e-4 to 9e-3 (q ≈ 0.05, ε = 3), so a check at the 1e-4 bracket's own lo would often
        fail and cost a second search.
        """
        order: dict[str, float | None] = dict.fromkeys(starts, self.target.near[0] if self.pinnable else None)
        known: dict[str, float] = {}  # gaps at the starts
        orders_tried = dict.fromkeys(starts, 0)
        pending = dict(starts)
        while pending:
            brackets = self._search_all(pending, shape, idle, order, known)
            known, pending, unchecked = {}, {}, {}
            for p, bracket in brackets.items():
                if order[p] is None or bracket.lo is None:
                    # the grid's own bracket; or met at the smallest σ on one order, so on the grid
                    self.solved[p] = self.target.root(bracket)
                elif bracket.hi is None:  # one order cannot meet the target: the grid may
                    order[p], pending[p] = None, bracket.lo
                else:
                    unchecked[p] = bracket.hi
            if not unchecked:
                continue
            below = {p: hi - math.log1p(max(self.rtol, CHECKED)) for p, hi in unchecked.items()}
            # every party's check on the whole grid in one search (`Target.gaps`)
            for p, (gap, minimum) in self.target.gaps(self._events(below, idle)).items():
                if gap > 0:
                    self.solved[p] = unchecked[p]
                    continue
                orders_tried[p] += 1
                order[p] = minimum if orders_tried[p] < 2 and math.isfinite(gap) else None
                pending[p], known[p] = below[p], gap

    def _search_all(
        self,
        starts: Mapping[str, float],
        shape: Shape,
        idle: float,
        order: Mapping[str, float | None],
        f0: Mapping[str, float],
    ) -> dict[str, Bracket]:
        """Returns each party's bracket, searched from its start at its RDP order (None: the whole
        grid); `f0` holds gaps known at the starts."""
        searches = {
            p: self.target.search(x0, shape=shape, rtol=self.rtol, f0=f0.get(p)) for p, x0 in starts.items()
        }
        brackets: dict[str, Bracket] = {}
        while True:
            for p, search in list(searches.items()):
                if search.x is None:
                    brackets[p] = search.result
                    del searches[p]
            if not searches:
                return brackets
            events = self._events({p: search.x for p, search in searches.items()}, idle)
            for p, search in searches.items():
                search.tell(self.target.gap(events[p], order=order[p]))

    def _events(self, x_of: Mapping[str, float], idle: float) -> dict[str, Event | None]:
        """Returns the events of each party of `x_of` at σ = eˣ, from one make_events call; where
        some σ is out of range, each party's at its own σ alone (None where that one is)."""
        events = self.events_at(self._sigmas(self.solved | x_of, idle))
        if events is not None:
            return {p: events[p] for p in x_of}
        alone = {p: self.events_at(math.exp(x)) for p, x in x_of.items()}
        return {p: None if alone[p] is None else alone[p][p] for p in x_of}

    def _split_groups(self, shape: Shape, idle: float) -> None:
        """Searches alone each group member whose events, equal at σ = 1, differ at the σ found."""
        events = self.events_at(self._sigmas(self.solved, idle)) or {}
        for members in self.groups.values():
            for p in members[1:]:
                if p in events and events[p] != events[members[0]]:
                    self.leader[p] = p
                    self.solved[p] = self._alone(p, self.solved[members[0]], shape)[0]

    def _sigmas(self, x_of: Mapping[str, float], idle: float) -> np.ndarray:
        """Returns σ per listed party from its leader's x; e^idle for a party that never releases or
        whose leader has no x in `x_of` (its events are not read)."""
        return np.array([math.exp(x_of.get(self.leader.get(p), idle)) for p in self.parties])

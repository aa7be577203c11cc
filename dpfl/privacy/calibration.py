"""Calibration: the smallest noise multiplier that meets a target (ε, δ), and the inverse.

Calibration searches σ on the accountant itself, for the exact schedule of releases the
caller describes (`make_events(σ)` returns each party's composed events). Two questions:

- `calibrate_noise_multiplier`: one σ for every party, the one the least private party needs.
- `calibrate_party_noise_multipliers`: each party its own σ, the smallest that makes its own
  ledger meet the target. This is right where each party is accounted on its own and its
  releases depend on its own σ only (ISRL-DP silos: a silo with more records samples at a
  lower rate and needs less noise). Parties with identical schedules (events are frozen
  dataclasses, equal by value) are calibrated once.

Guarantee, per party: the result meets the target and σ·(1 − 1e-3) does not. A search on the
whole accountant ends with a bracket lo < hi of evaluated points, ε(hi) ≤ target < ε(lo) and
hi/lo < 1 + rtol (rtol = 1e-4), and returns hi; ε is non-increasing in σ. Per-party searches
after the first, under the rdp accountant, bracket the ε of one RDP order (an upper bound on
the whole grid's) and then check the whole grid at hi/(1 + max(rtol, 1e-3)) instead
(`_PartySearch._in_lockstep`): within the guarantee, at a quarter of the cost.

The search itself is `dpfl.privacy.rootfind`'s, on f(x) = log ε(eˣ) − log ε_target with
x = log σ (`_Target.gap`), between σ = 1e-3 (or the accountant's floor) and 1e5. f is close
to a straight line, and evaluations are what cost: each new (q, σ) needs a fresh RDP curve,
0.05–0.5 s at every tracked order, about 1 ms under the rdp accountant for Gaussian releases,
where `pruned_epsilon` computes only the orders that can hold the minimum (starting near the
last one's) and gives the same ε. A search from a cold start takes about 6 evaluations; one
warm-started from a similar party's search 3–4.

Under the rdp accountant the search first runs on the grid's integer orders alone (exact in
dp-accounting, and cheap): ε there bounds the whole grid's from above, so its σ meets the
target and lies a few per cent above the answer, where the whole grid's search starts.

Results are remembered in this process by schedule and target (`_RESULTS`): a sweep's seeds
and a worker's later runs calibrate the same schedules again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpfl.errors import AccountingError, SpecError
from dpfl.privacy.accountants import accountant_class, make_accountant, rdp_pruned
from dpfl.privacy.accountants.base import Unsupported
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    GroupEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    gaussian_noise_multipliers,
)
from dpfl.privacy.rootfind import Bracket, RootSearch, Shape, find_root

__all__ = [
    "NoiseOutOfRange",
    "calibrate_noise_multiplier",
    "calibrate_party_noise_multipliers",
    "epsilon",
    "sgd_event",
]

_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e5
# A search on one RDP order ends with the whole grid failing the target this far below its σ
# (relative): the guarantee's σ·(1 − 1e-3), not the bracket's rtol (`_PartySearch._in_lockstep`).
_CHECKED = 1e-3

# σ ↦ each party's events (a list, or a mapping by party), None where the schedule refuses σ
_Schedule = Callable[[float], Sequence[Event] | None]
_PartySchedule = Callable[[float | np.ndarray], Mapping[str, Event] | None]


class NoiseOutOfRange(SpecError):
    """Raised by a schedule for a σ at which its mechanism has no guarantee.

    Calibration reads such a σ as ε = ∞ (it cannot meet any target), so a search may probe
    it; given directly as `privacy.noise_multiplier`, it is a plain SpecError.
    """


def sgd_event(*, noise_multiplier: float, sampling_rate: float, steps: int) -> Event:
    """Returns `steps` releases of a Gaussian sum on a Poisson sample at rate q (DP-SGD's schedule)."""
    release: Event = GaussianEvent(noise_multiplier)
    if sampling_rate < 1:
        release = PoissonSampledEvent(sampling_rate, release)
    return release if steps == 1 else SelfComposedEvent(release, steps)


def epsilon(events: Event | Sequence[Event], *, delta: float, accountant: str = "rdp", **options) -> float:
    """Returns the ε at δ of `events` (one event, or one composed event per party: the maximum)."""
    parties = [events] if isinstance(events, Event) else list(events)
    out = 0.0
    for event in parties:
        acc = make_accountant(accountant, **options)
        acc.compose(event)
        out = max(out, acc.epsilon(delta))
    return out


# ---------------------------------------------------------------------------------------------
# One σ for every party


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
    _check_target(target_epsilon)
    parties = _as_party_list(make_events)
    probe_sigma, probe = _probe(parties)
    target = _Target(epsilon=target_epsilon, delta=target_delta, accountant=accountant, options=options)
    target = target.releasing(probe)
    key = _result_key("one", (probe, parties(2 * probe_sigma)), (), target, rtol)
    if (known := _RESULTS.get(key)) is not None:
        return known
    rough = _on_exact_orders(calibrate_noise_multiplier, target, probe, make_events, rtol=rtol)
    x0 = 0.0 if rough is None else math.log(rough)
    return _remember(key, math.exp(_search_least_private(parties, target, x0, rtol)))


def _search_least_private(parties: _Schedule, target: _Target, x: float, rtol: float) -> float:
    """Returns the log σ found for the least private party at it, once every party meets the target there.

    The least private party at x is searched; if another party fails the target at the σ
    found, it is searched next, from there.

    Events the rdp accountant cannot prune (group privacy: each order's value is the inner
    curve's at 2^c times that order, hundreds of integer terms) are searched on few orders: at
    each step, ε at a local minimum over the grid, walked to from the party's last one
    (`_Walk`). Any order's ε bounds the whole grid's from above, so the σ found meets the target;
    the whole grid then accounts σ/(1 + max(rtol, 1e-3)), and if that still meets it (the walk
    stopped at a minimum that is not the grid's), the search goes on from there on the grid.
    """
    shape = Shape()
    walk = _Walk.of(target, parties(math.exp(x)))
    gaps = _gaps(parties, target, x, walk=walk)
    while True:
        worst = max(range(len(gaps)), key=gaps.__getitem__)
        f = _gap_at(parties, target, worst, walk=walk)
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
        if not _meets(target, parties(math.exp(x))):  # the worst one is met (a walked bound)
            gaps = _gaps(parties, target, x, walk=walk)
            continue
        below = x - math.log1p(max(rtol, _CHECKED))
        gaps = _gaps(parties, target, below)
        if max(gaps) > 0:
            return x
        x, walk = below, None


@dataclass
class _Walk:
    """Where each party's walk over the RDP grid last stopped (`rdp_pruned.walked_epsilon`)."""

    target: _Target
    near: dict[int, float]

    START = 16.0  # an order in the middle of where group privacy's minima lie (ε from 0.5 to 10)

    @classmethod
    def of(cls, target: _Target, events: Sequence[Event] | None) -> _Walk | None:
        """Returns a walk for these events under the rdp accountant if they hold group privacy,
        else None (the pruned accountant, or another, is cheap enough)."""
        if events is None or accountant_class(target.accountant) is not rdp_pruned.RDPAccountant:
            return None
        return cls(target, {}) if any(_group_privacy(e) for e in events) else None

    def gap(self, event: Event, party: int) -> float:
        """Returns the party's gap at a walked order: an upper bound on its gap on the whole grid."""
        options = rdp_pruned.pruned_options(self.target.options)
        start = self.near.get(party, self.START)
        try:
            eps, self.near[party] = rdp_pruned.walked_epsilon(
                event, delta=self.target.delta, near=start, **options
            )
        except (AccountingError, Unsupported, ValueError):  # no RDP bound there, or dp_accounting refuses
            return math.inf
        return self.target.gap_of(event, eps)


def _group_privacy(event: Event) -> bool:
    """Returns whether the event is or composes a `GroupEvent` for groups of more than one."""
    if isinstance(event, GroupEvent):
        return event.group_size > 1
    if isinstance(event, SelfComposedEvent):
        return _group_privacy(event.event)
    if isinstance(event, ComposedEvent | ParallelEvent):
        return any(_group_privacy(e) for e in event.events)
    return False


def _gaps(parties: _Schedule, target: _Target, x: float, *, walk: _Walk | None = None) -> list[float]:
    """Returns every party's gap at σ = eˣ (walked, if `walk`); [+∞] where the schedule refuses σ."""
    events = parties(math.exp(x))
    if events is None:
        return [math.inf]
    return [target.gap(e) if walk is None else walk.gap(e, i) for i, e in enumerate(events)]


# ---------------------------------------------------------------------------------------------
# Each party its own σ


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
    _check_target(target_epsilon)
    events_at = _refused_as_none(make_events)
    probe_sigma, probe = _probe(events_at)
    target = _Target(epsilon=target_epsilon, delta=target_delta, accountant=accountant, options=options)
    target = target.releasing(probe.values())
    key = _result_key("parties", (probe, events_at(2 * probe_sigma)), tuple(parties), target, rtol)
    if (known := _RESULTS.get(key)) is not None:
        return known.copy() if isinstance(known, np.ndarray) else known
    if stray := sorted(set(probe) - set(parties)):
        raise ValueError(f"parties {stray} release events but are not listed in `parties`")
    # each schedule's search starts at its σ on the exact (integer) orders, when that pays
    rough = _on_exact_orders(
        calibrate_party_noise_multipliers,
        target,
        list(probe.values()),
        make_events,
        rtol=rtol,
        parties=parties,
    )
    out = _PartySearch(events_at, parties, target, rtol, _group_equal(probe)).run(rough)
    if not _meets(target, events_at(out)):
        raise AccountingError(
            "per-party calibration: a party's releases depend on other parties' noise, so each "
            "cannot be calibrated on its own; calibrate one σ for all instead"
        )
    return _remember(key, float(out[0]) if len(out) and np.all(out == out[0]) else out)


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

    events_at: _PartySchedule
    parties: Sequence[str]  # the listed parties, in the order of make_events' σ array
    target: _Target
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
        return self.target.solve(_gap_at(self.events_at, self.target, party), x0, shape=shape, rtol=self.rtol)

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
            below = {p: hi - math.log1p(max(self.rtol, _CHECKED)) for p, hi in unchecked.items()}
            for p, event in self._events(below, idle).items():
                gap = self.target.gap(event)
                if gap > 0:
                    self.solved[p] = unchecked[p]
                    continue
                orders_tried[p] += 1
                order[p] = self.target.near[0] if orders_tried[p] < 2 and math.isfinite(gap) else None
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


# ---------------------------------------------------------------------------------------------
# The target, and what both calibrations share


@dataclass(frozen=True, kw_only=True)
class _Target:
    """What a calibration must meet (ε at δ under an accountant), and how far σ is from it."""

    epsilon: float
    delta: float
    accountant: str
    options: dict  # the accountant's options
    gaussian: bool = True  # the releases are Gaussian: the accountant's σ floor applies
    # The RDP order of the last ε computed: similar parties' and σ's minima lie near it. A memo,
    # shared by copies (`releasing`) and mutated in place, so not part of the target's value.
    near: list[float | None] = dataclasses.field(default_factory=lambda: [None], compare=False, repr=False)
    # Events found to meet the target (by the whole accountant or one order's upper bound), a
    # memo shared the same way: the final check of a calibration finds its parties' events here.
    met: set[Event] = dataclasses.field(default_factory=set, compare=False, repr=False)

    def releasing(self, events: Iterable[Event]) -> _Target:
        """Returns this target for a schedule of these events (the σ floor applies if any is Gaussian)."""
        return dataclasses.replace(self, gaussian=any(gaussian_noise_multipliers(e) for e in events))

    def gap(self, event: Event | None, *, order: float | None = None) -> float:
        """Returns log(ε / target ε) of one party's events: ≤ 0 meets the target; +inf if
        unaccountable or None (a σ the schedule refuses).

        With an RDP `order` (rdp accountant, `rdp_pruned.prunable` events), ε at that order alone:
        an upper bound on the whole accountant's.
        """
        if event is None:
            return math.inf
        try:
            if order is not None:
                conversion = rdp_pruned.pruned_options(self.options)["conversion"]
                eps = rdp_pruned.epsilon_at_order(event, delta=self.delta, order=order, conversion=conversion)
            elif rdp_pruned.applies(self.accountant, [event]):
                eps, self.near[0] = rdp_pruned.pruned_epsilon(
                    event, delta=self.delta, near=self.near[0], **rdp_pruned.pruned_options(self.options)
                )
            else:
                eps = epsilon(event, delta=self.delta, accountant=self.accountant, **self.options)
        except AccountingError:
            return math.inf
        return self.gap_of(event, eps)

    def gap_of(self, event: Event, eps: float) -> float:
        """Returns log(ε / target ε) for an ε of the event that bounds the whole accountant's
        from above, remembering the event as met if it meets the target."""
        gap = math.log(eps / self.epsilon) if eps > 0 else -math.inf
        if gap <= 0:
            self.met.add(event)
        return gap

    def meets(self, event: Event) -> bool:
        """Returns whether the event meets the target under the whole accountant."""
        return event in self.met or self.gap(event) <= 0

    @property
    def min_sigma(self) -> float:
        """Returns the smallest σ the search may evaluate: the accountant's bounded-cost floor."""
        floor = accountant_class(self.accountant).min_noise_multiplier if self.gaussian else None
        return max(_SIGMA_MIN, floor or 0.0)

    def search(self, x0: float, *, shape: Shape, rtol: float, f0: float | None = None) -> RootSearch:
        """Returns a search for log σ from x0, within the σ this target may evaluate."""
        x_min, x_max = math.log(self.min_sigma), math.log(_SIGMA_MAX)
        return RootSearch(x0, f0=f0, shape=shape, rtol=rtol, x_min=x_min, x_max=x_max)

    def solve(
        self, f: Callable[[float], float], x0: float, *, shape: Shape, rtol: float, f0: float | None = None
    ) -> tuple[float, Shape]:
        """Returns (log σ, fitted shape) of f's root searched from x0; raises where there is none."""
        x_min, x_max = math.log(self.min_sigma), math.log(_SIGMA_MAX)
        bracket = find_root(f, x0, f0=f0, shape=shape, rtol=rtol, x_min=x_min, x_max=x_max)
        return self.root(bracket), bracket.shape

    def root(self, bracket: Bracket | None) -> float:
        """Returns log σ of a finished search: its bracket's hi; raises if it left the range of σ."""
        assert bracket is not None
        if bracket.hi is None:
            raise self.unreachable()
        # met even at the smallest σ evaluated: the answer, unless the accountant cannot look lower
        if bracket.lo is None and self.min_sigma > _SIGMA_MIN:
            raise self.below_minimum()
        return bracket.hi

    def below_minimum(self) -> SpecError:
        return SpecError(
            "privacy.epsilon",
            f"{self.epsilon:g} at δ={self.delta:g} is met at a noise multiplier below "
            f"{self.min_sigma:g}, the smallest the {self.accountant} accountant evaluates in bounded "
            "time and memory; give a smaller ε or use the rdp accountant.",
        )

    def unreachable(self) -> SpecError:
        return SpecError(
            "target_epsilon",
            f"{self.epsilon:g} cannot be met at δ={self.delta:g} "
            f"with a noise multiplier ≤ {_SIGMA_MAX:g}; raise ε or δ.",
        )


def _check_target(target_epsilon: float) -> None:
    if not target_epsilon > 0:
        raise SpecError("target_epsilon", f"must be > 0; got {target_epsilon!r}.")


def _refused_as_none(make_events: Callable) -> Callable:
    """Returns make_events, giving None for a σ the schedule refuses (read as ε = ∞)."""

    def events_at(sigma):
        try:
            return make_events(sigma)
        except NoiseOutOfRange:
            return None

    return events_at


def _as_party_list(make_events: Callable[[float], Event | Sequence[Event]]) -> _Schedule:
    """Returns σ ↦ the list of every party's events (one event is one party); None where σ is refused."""

    def parties(sigma: float) -> list[Event] | None:
        try:
            events = make_events(sigma)
            return [events] if isinstance(events, Event) else list(events)
        except NoiseOutOfRange:
            return None

    return parties


def _gap_at(
    events_at: Callable, target: _Target, party: int | str, *, walk: _Walk | None = None
) -> Callable[[float], float]:
    """Returns f(x): `party`'s gap at σ = eˣ (+∞ where the schedule refuses σ), what a search
    solves; walked over the RDP grid if `walk` (an upper bound)."""

    def f(x: float) -> float:
        events = events_at(math.exp(x))
        if events is None:
            return math.inf
        return target.gap(events[party]) if walk is None else walk.gap(events[party], party)

    return f


def _probe(events_at: Callable[[float], Mapping[str, Event] | None]) -> tuple[float, Mapping[str, Event]]:
    """Returns σ = 1, or the first larger power of 4 the schedule accepts, and every party's events there."""
    sigma = 1.0
    while (events := events_at(sigma)) is None:
        sigma *= 4
        if sigma > _SIGMA_MAX:
            raise SpecError("privacy.noise_multiplier", f"no noise multiplier ≤ {_SIGMA_MAX:g} is accepted.")
    return sigma, events


def _meets(target: _Target, events: Mapping[str, Event] | Sequence[Event] | None) -> bool:
    """Returns whether every party's events (each distinct one accounted once) meet the target."""
    if events is None:
        return False
    distinct = set(events.values() if isinstance(events, Mapping) else events)
    return all(target.meets(event) for event in distinct)


def _on_exact_orders(
    calibrate: Callable, target: _Target, events: Sequence[Event], make_events: Callable, **kwargs
):
    """Returns what `calibrate` gives for the target on the integer orders of its grid alone.

    Under the rdp accountant, ε on the integer orders is cheap (dp-accounting's exact values,
    few computed) and an upper bound on ε over the whole grid: its σ meets the target too and
    lies a few per cent above the answer, where the whole grid's search starts. None when that
    does not pay (another accountant or event kind, a grid without fractional orders) or fails.
    """
    if not rdp_pruned.applies(target.accountant, events):
        return None
    orders = rdp_pruned.pruned_options(target.options)["orders"]
    integers = tuple(a for a in orders if a == int(a))
    if not integers or len(integers) == len(orders):
        return None
    try:
        return calibrate(
            make_events,
            target_epsilon=target.epsilon,
            target_delta=target.delta,
            accountant=target.accountant,
            **kwargs,
            **(target.options | {"orders": integers}),
        )
    except SpecError:
        return None


# ---------------------------------------------------------------------------------------------
# Results remembered

# Calibrated σ by schedule and target: a sweep's runs, and a worker's repeated runs, calibrate
# the same schedules again and again. A schedule is known by its events at two σ (the probe's
# and twice it), which is what `make_events` makes of σ for every schedule a run builds. Only
# this process writes here; and a run's ε is always accounted afresh from what it released.
_RESULTS: OrderedDict[str, float | np.ndarray] = OrderedDict()
_RESULTS_KEPT = 512


def _result_key(kind: str, probe: object, parties: tuple, target: _Target, rtol: float) -> str:
    """Returns the cache key of a calibration: its schedule (the events at the probe σ), target and tolerance.

    Events are frozen dataclasses whose repr holds every field, floats exactly.
    """
    options = sorted(target.options.items())
    text = repr((kind, probe, parties, target.epsilon, target.delta, target.accountant, options, rtol))
    return hashlib.sha256(text.encode()).hexdigest()


def _remember(key: str, sigma: float | np.ndarray) -> float | np.ndarray:
    _RESULTS[key] = sigma.copy() if isinstance(sigma, np.ndarray) else sigma
    _RESULTS.move_to_end(key)
    while len(_RESULTS) > _RESULTS_KEPT:
        _RESULTS.popitem(last=False)
    return sigma

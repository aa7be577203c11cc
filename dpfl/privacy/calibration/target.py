"""What a calibration must meet, how far a σ is from it, and what both calibrations share."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpfl.errors import AccountingError, SpecError
from dpfl.formats import number_text
from dpfl.privacy.accountants import accountant_class, rdp_pruned
from dpfl.privacy.calibration.accounting import NoiseOutOfRange, epsilon
from dpfl.privacy.events import Event, gaussian_noise_multipliers
from dpfl.privacy.rootfind import Bracket, RootSearch, Shape, find_root

if TYPE_CHECKING:
    from dpfl.privacy.calibration.walk import Walk

SIGMA_MIN, SIGMA_MAX = 1e-3, 1e5
# A search on one RDP order ends with the whole grid failing the target this far below its σ
# (relative): the guarantee's σ·(1 − 1e-3), not the bracket's rtol (`_PartySearch._in_lockstep`).
CHECKED = 1e-3

# σ ↦ each party's events (a list, or a mapping by party), None where the schedule refuses σ
Schedule = Callable[[float], Sequence[Event] | None]
PartySchedule = Callable[[float | np.ndarray], Mapping[str, Event] | None]


@dataclass(frozen=True, kw_only=True)
class Target:
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

    def releasing(self, events: Iterable[Event]) -> Target:
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

    def gaps(self, events: Mapping[str, Event | None]) -> dict[str, tuple[float, float | None]]:
        """Returns `gap` of each party's events on the whole accountant, with the RDP order that
        held its minimum (None off the rdp accountant); under the rdp accountant all in one search
        (`rdp_pruned.pruned_epsilons`), the same numbers as one by one."""
        known = {p: e for p, e in events.items() if e is not None}
        if len(known) < 2 or not rdp_pruned.applies(self.accountant, list(known.values())):
            return {p: self._gap_and_order(e) for p, e in events.items()}
        try:
            found = rdp_pruned.pruned_epsilons(
                list(known.values()),
                delta=self.delta,
                near=self.near[0],
                **rdp_pruned.pruned_options(self.options),
            )
        except AccountingError:  # some party has no finite ε: each alone, as `gap` scores it
            return {p: self._gap_and_order(e) for p, e in events.items()}
        self.near[0] = found[-1][1]
        out = {
            p: (self.gap_of(e, eps), order) for (p, e), (eps, order) in zip(known.items(), found, strict=True)
        }
        return {p: out.get(p, (math.inf, None)) for p in events}

    def _gap_and_order(self, event: Event | None) -> tuple[float, float | None]:
        gap = self.gap(event)
        return gap, self.near[0]

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
        return max(SIGMA_MIN, floor or 0.0)

    def search(self, x0: float, *, shape: Shape, rtol: float, f0: float | None = None) -> RootSearch:
        """Returns a search for log σ from x0, within the σ this target may evaluate."""
        x_min, x_max = math.log(self.min_sigma), math.log(SIGMA_MAX)
        return RootSearch(x0, f0=f0, shape=shape, rtol=rtol, x_min=x_min, x_max=x_max)

    def solve(
        self, f: Callable[[float], float], x0: float, *, shape: Shape, rtol: float, f0: float | None = None
    ) -> tuple[float, Shape]:
        """Returns (log σ, fitted shape) of f's root searched from x0; raises where there is none."""
        x_min, x_max = math.log(self.min_sigma), math.log(SIGMA_MAX)
        bracket = find_root(f, x0, f0=f0, shape=shape, rtol=rtol, x_min=x_min, x_max=x_max)
        return self.root(bracket), bracket.shape

    def root(self, bracket: Bracket | None) -> float:
        """Returns log σ of a finished search: its bracket's hi; raises if it left the range of σ."""
        assert bracket is not None
        if bracket.hi is None:
            raise self.unreachable()
        # met even at the smallest σ evaluated: the answer, unless the accountant cannot look lower
        if bracket.lo is None and self.min_sigma > SIGMA_MIN:
            raise self.below_minimum()
        return bracket.hi

    def below_minimum(self) -> SpecError:
        return SpecError(
            "privacy.epsilon",
            f"{self.epsilon:g} at δ = {number_text(self.delta)} is met at a noise multiplier below "
            f"{self.min_sigma:g}, the smallest the {self.accountant} accountant evaluates in bounded "
            "time and memory; give a smaller ε or use the rdp accountant.",
        )

    def unreachable(self) -> SpecError:
        return SpecError(
            "target_epsilon",
            f"{self.epsilon:g} cannot be met at δ = {number_text(self.delta)} "
            f"with a noise multiplier ≤ {SIGMA_MAX:g}; raise ε or δ.",
        )


def check_target(target_epsilon: float) -> None:
    if not target_epsilon > 0:
        raise SpecError("target_epsilon", f"must be > 0; got {target_epsilon!r}.")


def refused_as_none(make_events: Callable) -> Callable:
    """Returns make_events, giving None for a σ the schedule refuses (read as ε = ∞)."""

    def events_at(sigma):
        try:
            return make_events(sigma)
        except NoiseOutOfRange:
            return None

    return events_at


def as_party_list(make_events: Callable[[float], Event | Sequence[Event]]) -> Schedule:
    """Returns σ ↦ the list of every party's events (one event is one party); None where σ is refused."""

    def parties(sigma: float) -> list[Event] | None:
        try:
            events = make_events(sigma)
            return [events] if isinstance(events, Event) else list(events)
        except NoiseOutOfRange:
            return None

    return parties


def gap_at(
    events_at: Callable, target: Target, party: int | str, *, walk: Walk | None = None
) -> Callable[[float], float]:
    """Returns f(x): `party`'s gap at σ = eˣ (+∞ where the schedule refuses σ), what a search
    solves; walked over the RDP grid if `walk` (an upper bound)."""

    def f(x: float) -> float:
        events = events_at(math.exp(x))
        if events is None:
            return math.inf
        return target.gap(events[party]) if walk is None else walk.gap(events[party], party)

    return f


def probe_schedule(
    events_at: Callable[[float], Mapping[str, Event] | None],
) -> tuple[float, Mapping[str, Event]]:
    """Returns σ = 1, or the first larger power of 4 the schedule accepts, and every party's events there."""
    sigma = 1.0
    while (events := events_at(sigma)) is None:
        sigma *= 4
        if sigma > SIGMA_MAX:
            raise SpecError("privacy.noise_multiplier", f"no noise multiplier ≤ {SIGMA_MAX:g} is accepted.")
    return sigma, events


def meets(target: Target, events: Mapping[str, Event] | Sequence[Event] | None) -> bool:
    """Returns whether every party's events (each distinct one accounted once) meet the target."""
    if events is None:
        return False
    distinct = set(events.values() if isinstance(events, Mapping) else events)
    return all(target.meets(event) for event in distinct)


def on_exact_orders(
    calibrate: Callable, target: Target, events: Sequence[Event], make_events: Callable, **kwargs
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

"""Calibration: the smallest noise multiplier that meets a target (ε, δ), and the inverse.

Calibration searches σ on the accountant itself, for the exact schedule of releases the
caller describes (`make_events(σ)` returns each party's composed events). Two questions:

- `calibrate_noise_multiplier`: one σ for every party, the one the least private party needs.
- `calibrate_party_noise_multipliers`: each party its own σ, the smallest that makes its own
  ledger meet the target. This is right where each party is accounted on its own and its
  releases depend on its own σ only (ISRL-DP silos: a silo with more records samples at a
  lower rate and needs less noise). Parties with identical schedules (events are frozen
  dataclasses, equal by value) are calibrated once.

Guarantee, per party: the result meets the target and σ·(1 − 1e-3) does not. Each search
ends with a bracket lo < hi of evaluated points, ε(hi) ≤ target < ε(lo) and hi/lo < 1 + rtol
(rtol = 1e-4), and returns hi; ε is non-increasing in σ.

Root finding works on f(x) = log ε(eˣ) − log ε_target with x = log σ, which is close to a
straight line (ε ∝ 1/σ for a Gaussian-type release). Each new (q, σ) costs a fresh RDP curve:
0.05–0.5 s at every tracked order, about 1 ms under the rdp accountant for Gaussian releases,
where `pruned_epsilon` computes only the orders that can hold the minimum (starting near the
last one's) and gives the same ε. Either way evaluations are kept few: a first step from a model of f (a
parabola fitted to a similar party's search, or slope −1), aimed tol/2 past the predicted
root, secant steps until the root is bracketed, then regula falsi with the Anderson–Björck
rule. Every interpolated point is kept at least tol/2 inside the bracket, so once the
interpolation is accurate the next point lands just across the root and the bracket closes;
four steps that fail to halve the bracket are followed by a bisection. From a cold start a
search takes about 6 evaluations (plain bisection took about 17); a warm-started one 3–4.

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
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpfl.errors import AccountingError, SpecError
from dpfl.privacy.accountants import accountant_class, make_accountant, rdp_pruned
from dpfl.privacy.events import (
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    gaussian_noise_multipliers,
)

__all__ = [
    "NoiseOutOfRange",
    "calibrate_noise_multiplier",
    "calibrate_party_noise_multipliers",
    "epsilon",
    "sgd_event",
]

_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e5
_MAX_STEP = math.log(4.0)  # a bracketing step moves σ by at most ×4
_MIN_SPREAD = 0.005  # points closer than this in log σ are too close to tell a curvature from noise


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
    target = _Target(target_epsilon, target_delta, accountant, options)

    def parties(sigma: float) -> list[Event] | None:
        try:
            events = make_events(sigma)
        except NoiseOutOfRange:
            return None
        return [events] if isinstance(events, Event) else list(events)

    def gaps(sigma: float) -> list[float]:
        events = parties(sigma)
        return [math.inf] if events is None else [target.gap(e) for e in events]

    probe_sigma, probe = _probe(parties)
    target = dataclasses.replace(target, gaussian=any(gaussian_noise_multipliers(e) for e in probe))
    key = _result_key("one", (probe, parties(2 * probe_sigma)), (), target, rtol)
    if (known := _RESULTS.get(key)) is not None:
        return known
    rough = _on_exact_orders(calibrate_noise_multiplier, target, probe, make_events, rtol=rtol)
    x, shape = (0.0 if rough is None else math.log(rough)), _Shape()
    values = gaps(math.exp(x))
    while True:
        worst = max(range(len(values)), key=values.__getitem__)

        def f(x: float, k: int = worst) -> float:
            events = parties(math.exp(x))
            return math.inf if events is None else target.gap(events[k])

        x, shape = _drive(_search(x0=x, f0=values[worst], shape=shape, rtol=rtol, target=target), f)
        values = gaps(math.exp(x))
        # ε falls with σ, so each repeat moves to a larger σ and visits a party at most once.
        if max(values) <= 0:
            return _remember(key, math.exp(x))


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
    """Returns each listed party's own smallest σ (to relative `rtol`) meeting the target on its ledger.

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
    target = _Target(target_epsilon, target_delta, accountant, options)
    position = {p: i for i, p in enumerate(parties)}

    def events_at(sigma: float | np.ndarray) -> Mapping[str, Event] | None:
        try:
            return make_events(sigma)
        except NoiseOutOfRange:
            return None

    probe_sigma, probe = _probe(events_at)
    target = dataclasses.replace(target, gaussian=any(gaussian_noise_multipliers(e) for e in probe.values()))
    key = _result_key("parties", (probe, events_at(2 * probe_sigma)), tuple(parties), target, rtol)
    if (known := _RESULTS.get(key)) is not None:
        return known.copy() if isinstance(known, np.ndarray) else known
    stray = sorted(set(probe) - set(position))
    if stray:
        raise ValueError(f"parties {stray} release events but are not listed in `parties`")
    groups: dict[Event, list[str]] = {}
    for party, event in probe.items():
        groups.setdefault(event, []).append(party)
    leader = {p: members[0] for members in groups.values() for p in members}
    first, *others = [members[0] for members in groups.values()]
    # each schedule's search starts at its σ on the exact (integer) orders, when that pays
    rough = _on_exact_orders(
        calibrate_party_noise_multipliers,
        target,
        list(probe.values()),
        make_events,
        rtol=rtol,
        parties=parties,
    )
    start = {}
    if rough is not None:
        rough = np.broadcast_to(np.asarray(rough, dtype=float), (len(parties),))
        start = {p: math.log(rough[position[p]]) for p in [first, *others]}

    def alone(party: str, x0: float, shape: _Shape) -> tuple[float, _Shape]:
        def f(x: float) -> float:
            events = events_at(math.exp(x))
            return math.inf if events is None else target.gap(events[party])

        return _drive(_search(x0=x0, f0=None, shape=shape, rtol=rtol, target=target), f)

    x1, shape = alone(first, start.get(first, 0.0), _Shape())
    solved = {first: x1}
    searches = {
        p: _search(x0=start.get(p, x1), f0=None, shape=shape, rtol=rtol, target=target) for p in others
    }
    asked = {p: next(search) for p, search in searches.items()}

    def sigmas(x_of: Mapping[str, float], idle: float = x1) -> np.ndarray:
        return np.array([math.exp(x_of[leader[p]] if p in leader else idle) for p in parties])

    while asked:
        events = events_at(sigmas(solved | asked))
        for p in list(asked):
            if events is not None:
                fx = target.gap(events[p])
            else:  # some σ asked is out of range: account each schedule at its own σ alone
                alone_events = events_at(math.exp(asked[p]))
                fx = math.inf if alone_events is None else target.gap(alone_events[p])
            try:
                asked[p] = searches[p].send(fx)
            except StopIteration as done:
                solved[p] = done.value[0]
                del asked[p]
    events = events_at(sigmas(solved)) or {}
    for members in groups.values():  # equal at σ = 1; a member whose events differ is searched alone
        for p in members[1:]:
            if p in events and events[p] != events[members[0]]:
                leader[p] = p
                solved[p] = alone(p, solved[members[0]], shape)[0]
    out = sigmas(solved, idle=max(solved.values()))
    if not _meets(target, events_at(out)):
        raise AccountingError(
            "per-party calibration: a party's releases depend on other parties' noise, so each "
            "cannot be calibrated on its own; calibrate one σ for all instead"
        )
    return _remember(key, float(out[0]) if len(out) and np.all(out == out[0]) else out)


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


def _meets(target: _Target, events: Mapping[str, Event] | Sequence[Event] | None) -> bool:
    """Returns whether every party's events (each distinct one accounted once) meet the target."""
    if events is None:
        return False
    distinct = set(events.values() if isinstance(events, Mapping) else events)
    return all(target.gap(event) <= 0 for event in distinct)


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


def _check_target(target_epsilon: float) -> None:
    if not target_epsilon > 0:
        raise SpecError("target_epsilon", f"must be > 0; got {target_epsilon!r}.")


@dataclass(frozen=True)
class _Shape:
    """f near a root: f(root + Δ) ≈ slope·Δ + curvature·Δ²/2. A warm start for a similar party.

    The default, slope −1 and no curvature, is a Gaussian release's ε ∝ 1/σ.
    """

    slope: float = -1.0
    curvature: float = 0.0

    def step(self, fx: float) -> float:
        """Returns the Δ that takes f from fx to 0 under this model (the root nearer to 0)."""
        disc = self.slope**2 - 2 * self.curvature * fx
        if self.curvature == 0 or disc < 0:
            return -fx / self.slope
        return -2 * fx / (self.slope - math.sqrt(disc))

    @classmethod
    def fit(cls, points: Sequence[tuple[float, float]], root: float, prior: _Shape) -> _Shape:
        """Returns the parabola's slope and curvature at `root` through up to three spread-out points."""
        chosen: list[tuple[float, float]] = []
        for x, fx in sorted(points, key=lambda p: abs(p[0] - root)):
            if math.isfinite(fx) and all(abs(x - c[0]) >= _MIN_SPREAD for c in chosen):
                chosen.append((x, fx))
            if len(chosen) == 3:
                break
        if len(chosen) < 2:
            return prior
        (xa, fa), (xb, fb) = chosen[:2]
        d1 = (fb - fa) / (xb - xa)
        d2 = 0.0
        if len(chosen) == 3:
            xc, fc = chosen[2]
            d2 = ((fc - fb) / (xc - xb) - d1) / (xc - xa)
        slope = d1 + d2 * (2 * root - xa - xb)
        return cls(slope, 2 * d2) if slope < 0 else prior


_Search = Generator[float, float, tuple[float, _Shape]]  # yields x = log σ, is sent f(x); returns (x, shape)


@dataclass(frozen=True)
class _Target:
    epsilon: float
    delta: float
    accountant: str
    options: dict
    gaussian: bool = True  # the releases are Gaussian: the accountant's σ floor applies
    # the RDP order of the last ε computed: similar parties' and σ's minima lie near it
    near: list[float | None] = dataclasses.field(default_factory=lambda: [None])

    def gap(self, event: Event) -> float:
        """Returns log(ε / target ε) of one party's events: ≤ 0 meets the target; +inf if unaccountable."""
        try:
            if rdp_pruned.applies(self.accountant, [event]):
                eps, self.near[0] = rdp_pruned.pruned_epsilon(
                    event, delta=self.delta, near=self.near[0], **rdp_pruned.pruned_options(self.options)
                )
            else:
                eps = epsilon(event, delta=self.delta, accountant=self.accountant, **self.options)
        except AccountingError:
            return math.inf
        return math.log(eps / self.epsilon) if eps > 0 else -math.inf

    @property
    def min_sigma(self) -> float:
        """Returns the smallest σ the search may evaluate: the accountant's bounded-cost floor."""
        floor = accountant_class(self.accountant).min_noise_multiplier if self.gaussian else None
        return max(_SIGMA_MIN, floor or 0.0)

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


def _probe(events_at: Callable[[float], Mapping[str, Event] | None]) -> tuple[float, Mapping[str, Event]]:
    """Returns σ = 1, or the first larger power of 4 the schedule accepts, and every party's events there."""
    sigma = 1.0
    while (events := events_at(sigma)) is None:
        sigma *= 4
        if sigma > _SIGMA_MAX:
            raise SpecError("privacy.noise_multiplier", f"no noise multiplier ≤ {_SIGMA_MAX:g} is accepted.")
    return sigma, events


def _drive(search: _Search, f: Callable[[float], float]) -> tuple[float, _Shape]:
    """Returns what `search` returns, answering each x it asks for with f(x)."""
    try:
        x = next(search)
        while True:
            x = search.send(f(x))
    except StopIteration as done:
        return done.value


def _search(*, x0: float, f0: float | None, shape: _Shape, rtol: float, target: _Target) -> _Search:
    """Searches the smallest x = log σ, to within log(1 + rtol), with f(x) ≤ 0; returns (x, shape).

    A generator: it yields each x it needs f at and is sent f(x) back, so that several
    searches can share one evaluation of a run's plan. `shape` predicts the first step (a
    similar party's f near its root); later steps use secants. The returned shape is fitted
    to this search's own points, a warm start for the next.
    """
    tol = math.log1p(rtol)
    x_min, x_max = math.log(target.min_sigma), math.log(_SIGMA_MAX)
    if f0 is None:
        f0 = yield x0
    lo: tuple[float, float] | None = None  # (x, f) with f > 0: too little noise
    hi: tuple[float, float] | None = None  # (x, f) with f ≤ 0: meets the target

    def keep(x: float, fx: float) -> None:
        nonlocal lo, hi
        if fx > 0:
            if lo is None or x > lo[0]:
                lo = (x, fx)
        elif hi is None or x < hi[0]:
            hi = (x, fx)

    keep(x0, f0)
    seen = [(x0, f0)]
    while lo is None or hi is None:  # bracket the root: a model step, then secant steps
        x, fx = seen[-1]
        model = shape
        if len(seen) > 1 and math.isfinite(seen[-2][1]) and math.isfinite(fx) and fx != seen[-2][1]:
            chord = (fx - seen[-2][1]) / (x - seen[-2][0])
            model = _Shape(chord) if chord < 0 else shape
        # Aim just past the predicted root, so that an accurate prediction brackets it at once;
        # at f = +∞ (no guarantee) or −∞ (ε = 0) only the direction is known.
        step = math.copysign(_MAX_STEP, fx) if math.isinf(fx) else model.step(fx) + math.copysign(tol / 2, fx)
        step = min(max(step, tol), _MAX_STEP) if fx > 0 else max(min(step, -tol), -_MAX_STEP)
        x_new = x + step
        if x_new > x_max:
            raise target.unreachable()
        if x_new < x_min:  # meets the target even at the smallest σ considered
            if target.min_sigma > _SIGMA_MIN:  # the accountant cannot look lower: not the smallest σ
                raise target.below_minimum()
            return hi[0], shape  # type: ignore[index]  # fx ≤ 0 here, so hi is set
        f_new = yield x_new
        keep(x_new, f_new)
        seen.append((x_new, f_new))

    (xl, fl), (xh, fh) = lo, hi
    wl, wh = fl, fh  # interpolation weights; the endpoint that stays put is scaled down
    kept_side, widths = "", [xh - xl]
    while xh - xl > tol:
        if len(widths) >= 5 and widths[-1] > widths[-5] / 2:
            x = (xl + xh) / 2  # four steps without halving the bracket: bisect
        elif math.isfinite(wl) and math.isfinite(wh) and wl != wh:
            x = xl + wl * (xh - xl) / (wl - wh)
        else:
            x = (xl + xh) / 2
        x = min(max(x, xl + tol / 2), xh - tol / 2)
        fx = yield x
        seen.append((x, fx))
        if fx > 0:
            if kept_side == "h":  # Anderson–Björck: the retained endpoint's weight shrinks
                wh *= _shrink(fx, fl)
            xl, fl, wl, kept_side = x, fx, fx, "h"
        else:
            if kept_side == "l":
                wl *= _shrink(fx, fh)
            xh, fh, wh, kept_side = x, fx, fx, "l"
        widths.append(xh - xl)
    return xh, _Shape.fit(seen, xh, shape)


def _shrink(f_new: float, f_old: float) -> float:
    """Returns the Anderson–Björck factor 1 − f_new/f_old, or 1/2 where that is not in (0, 1)."""
    m = 1 - f_new / f_old if f_old != 0 and math.isfinite(f_old) and math.isfinite(f_new) else 0.0
    return m if 0 < m < 1 else 0.5

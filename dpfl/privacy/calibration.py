"""Calibration: the smallest noise multiplier that meets a target (ε, δ), and the inverse.

Calibration bisects on the accountant itself, for the exact schedule of releases the caller
describes (`make_events(σ)` returns each party's composed events). The result always meets
the target, and σ·(1 − 1e-3) does not: the bracket is narrowed until hi/lo < 1 + 1e-4 and hi
is returned, and ε is non-increasing in σ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dpfl.errors import AccountingError, SpecError
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent

__all__ = ["calibrate_noise_multiplier", "epsilon", "sgd_event"]

_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e5


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

    With several parties, the bisection runs on the least private party only (found at a first
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
    if not target_epsilon > 0:
        raise SpecError("target_epsilon", f"must be > 0; got {target_epsilon!r}.")

    def parties(sigma: float) -> list[Event]:
        events = make_events(sigma)
        return [events] if isinstance(events, Event) else list(events)

    def epsilons(events: list[Event]) -> list[float]:
        out = []
        for event in events:
            try:
                out.append(epsilon(event, delta=target_delta, accountant=accountant, **options))
            except AccountingError:
                out.append(math.inf)
        return out

    eps = epsilons(parties(1.0))
    while True:
        worst = max(range(len(eps)), key=eps.__getitem__)
        sigma = _bisect(
            lambda s, k=worst: epsilons([parties(s)[k]])[0] <= target_epsilon,
            target_epsilon,
            target_delta,
            rtol,
        )
        eps = epsilons(parties(sigma))
        # ε falls with σ, so each repeat moves to a larger σ and visits a party at most once.
        if max(eps) <= target_epsilon:
            return sigma


def _bisect(meets: Callable[[float], bool], target_epsilon: float, target_delta: float, rtol: float) -> float:
    hi = 1.0
    while not meets(hi):
        hi *= 4
        if hi > _SIGMA_MAX:
            raise SpecError(
                "target_epsilon",
                f"{target_epsilon:g} cannot be met at δ={target_delta:g} "
                f"with a noise multiplier ≤ {_SIGMA_MAX:g}; raise ε or δ.",
            )
    lo = hi / 4
    while meets(lo):
        hi, lo = lo, lo / 4
        if lo < _SIGMA_MIN:
            return hi
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi

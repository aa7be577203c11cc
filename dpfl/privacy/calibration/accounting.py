"""The accountant's side of calibration: ε of a schedule's events, and DP-SGD's schedule."""

from __future__ import annotations

from collections.abc import Sequence

from dpfl.errors import SpecError
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent


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

"""dp-accounting's `DpEvent`s translated into our ledger's events: the inverse of `to_dp_accounting`.

A researcher's code (an Opacus accountant's history, a hand-rolled loop that composes
`dp_accounting` events) describes its releases as `DpEvent`s; `dpfl.track` logs them as our
events, so that the dashboard recomputes their ε with the same accountants as our own runs.
Only exact translations are made: an event with no counterpart here (tree aggregation, a
non-private or unsupported event) is refused, naming it, and never approximated.
"""

from __future__ import annotations

from dpfl.errors import SpecError
from dpfl.privacy.dpa import dp_event
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

__all__ = ["from_dp_accounting"]


def from_dp_accounting(event: dp_event.DpEvent, *, field: str = "event") -> Event | None:
    """Returns our event for a dp-accounting `DpEvent`, or None for `NoOpDpEvent` (nothing released).

    Raises:
        SpecError: the event has no exact counterpart here, or is not private, naming `field`.
    """
    if isinstance(event, dp_event.NoOpDpEvent):
        return None
    if isinstance(event, dp_event.GaussianDpEvent):
        return GaussianEvent(event.noise_multiplier)
    if isinstance(event, dp_event.LaplaceDpEvent):
        return LaplaceEvent(event.noise_multiplier)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        inner = from_dp_accounting(event.event, field=f"{field}.event")
        return None if inner is None else PoissonSampledEvent(event.sampling_probability, inner)
    if isinstance(event, dp_event.SampledWithoutReplacementDpEvent):
        inner = from_dp_accounting(event.event, field=f"{field}.event")
        if inner is None:
            return None
        return SampledWithoutReplacementEvent(event.source_dataset_size, event.sample_size, inner)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = from_dp_accounting(event.event, field=f"{field}.event")
        return None if inner is None or event.count == 0 else SelfComposedEvent(inner, event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        parts = [from_dp_accounting(e, field=f"{field}.events.{i}") for i, e in enumerate(event.events)]
        kept = tuple(p for p in parts if p is not None)
        return ComposedEvent(kept) if kept else None
    if isinstance(event, dp_event.NonPrivateDpEvent):
        raise SpecError(field, "is a NonPrivateDpEvent: a release without privacy has no ε to account.")
    raise SpecError(
        field,
        f"is a {type(event).__name__}, which has no exact counterpart in the dpfl ledger; log it as "
        "Gaussian, Laplace, Poisson-sampled, sampled-without-replacement, self-composed or composed events.",
    )

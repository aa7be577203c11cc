"""Privacy-loss-distribution accountant: dp_accounting's PLD, plus the shuffle dominating pair.

Each distinct event's PLD is built once (cached) and composed by convolution. Events
dp_accounting knows get their PLD from `dp_accounting.pld.PLDAccountant`; a ShuffleEvent gets
the PLD of the Feldman–McMillan–Talwar dominating pair (P, Q), which composes exactly because
the shuffled output of neighbours is a post-processing of P vs Q. An (ε, δ)-DP release
(ApproxDPEvent) gets the PLD of its dominating pair (dp_accounting's `from_privacy_parameters`).
Votes are accounted data-independently; group events are refused (use `rdp` or `group`).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from dpfl.errors import AccountingError
from dpfl.formats import number_text
from dpfl.privacy import dpa, shuffle
from dpfl.privacy.accountants.base import ACCOUNTANTS, Accountant, Unsupported
from dpfl.privacy.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    SelfComposedEvent,
    ShuffleEvent,
    to_dp_accounting,
)

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

__all__ = ["PLDAccountant"]

_INTERVAL = 1e-4  # dp_accounting's default discretisation of the privacy loss, also the finest allowed
# The privacy-loss range of a Gaussian grows as 1/σ², and so do the PLD's grid and every
# convolution of it. Measured on the digits ISRL-DP MB-SGD spec (4 silos, 20 rounds, q ≈ 0.18,
# two shared cores): σ = 0.5 33 s / 0.54 GB, 0.3 43 s / 0.73 GB, 0.2 68 s / 0.97 GB,
# 0.1 > 120 s / > 2 GB,
# 0.01 > 3 GB (MemoryError; > 7 min and 4.5 GB without a limit).
_MIN_NOISE_MULTIPLIER = 0.3


@functools.lru_cache(maxsize=4096)
def _event_pld(event: Event, interval: float) -> PrivacyLossDistribution:
    pld = dpa.pld()
    dpa_event = to_dp_accounting(event)
    if dpa_event is not None:
        accountant = pld.PLDAccountant(value_discretization_interval=interval)
        if not accountant.supports(dpa_event):
            raise Unsupported(event, "dp_accounting's PLD accountant does not support it")
        accountant.compose(dpa_event)
        # dp_accounting keeps the composed PLD private; reading it avoids re-deriving its mechanisms.
        return accountant._pld
    if isinstance(event, SelfComposedEvent):
        return _event_pld(event.event, interval).self_compose(event.count)
    if isinstance(event, ComposedEvent):
        out = pld.privacy_loss_distribution.identity(value_discretization_interval=interval)
        for sub in event.events:
            out = out.compose(_event_pld(sub, interval))
        return out
    if isinstance(event, ShuffleEvent):
        log_p, log_q, dropped = shuffle.shuffle_log_pmfs(
            local_epsilon=event.local_epsilon, num_users=event.num_users
        )
        if dropped > 0:  # mass left out of the pmfs counts as privacy loss +∞ (pessimistic)
            log_p = {**log_p, "truncated": math.log(dropped)}
        return pld.privacy_loss_distribution.from_two_probability_mass_functions(
            log_q, log_p, pessimistic_estimate=True, value_discretization_interval=interval
        )
    if isinstance(event, ApproxDPEvent):
        return pld.privacy_loss_distribution.from_privacy_parameters(
            pld.common.DifferentialPrivacyParameters(event.epsilon, event.delta),
            value_discretization_interval=interval,
        )
    raise Unsupported(event, "the PLD accountant has no privacy loss distribution for it")


def _check_noise_floor(event: Event) -> None:
    """Raises Unsupported for a Gaussian release below the σ whose PLD fits in bounded memory."""
    if isinstance(event, GaussianEvent) and event.noise_multiplier < _MIN_NOISE_MULTIPLIER:
        raise Unsupported(
            event,
            f"noise multiplier {event.noise_multiplier:g} < {_MIN_NOISE_MULTIPLIER:g}, below which its "
            "privacy loss distribution outgrows bounded time and memory; use the rdp accountant",
        )
    for sub in (getattr(event, "event", None), *getattr(event, "events", ())):
        if isinstance(sub, Event):
            _check_noise_floor(sub)


@ACCOUNTANTS.register("pld")
class PLDAccountant(Accountant):
    """Privacy loss distributions (dp_accounting): tight numerical (ε, δ) for Gaussian-type releases.

    Args:
        value_discretization_interval: PLD grid step; smaller is tighter and slower.
    """

    description = "privacy loss distributions (dp_accounting); numerical shuffle dominating pair"
    min_noise_multiplier = _MIN_NOISE_MULTIPLIER

    def __init__(self, *, value_discretization_interval: float = _INTERVAL):
        super().__init__()
        # A finer grid grows time and memory without bound (the grid is range / interval).
        if not _INTERVAL <= value_discretization_interval <= 1.0:
            raise ValueError(
                f"value_discretization_interval must be in [{_INTERVAL:g}, 1]; "
                f"got {value_discretization_interval!r}"
            )
        self.interval = value_discretization_interval
        self.pld = dpa.pld().privacy_loss_distribution.identity(value_discretization_interval=self.interval)

    def _event(self, event: Event) -> PrivacyLossDistribution:
        try:
            return _event_pld(event, self.interval)
        except Unsupported:
            raise
        except (ValueError, NotImplementedError) as exc:
            raise Unsupported(event, str(exc)) from None

    def _check(self, event: Event) -> None:
        _check_noise_floor(event)
        self._event(event)

    def _compose(self, event: Event, count: int) -> None:
        pld = self._event(event)
        self.pld = self.pld.compose(pld if count == 1 else pld.self_compose(count))

    def epsilon(self, delta: float) -> float:
        """Returns ε at δ; raises AccountingError where the PLD cannot bound it."""
        eps = self.pld.get_epsilon_for_delta(delta)
        if not math.isfinite(eps):
            raise AccountingError(
                f"pld: δ = {number_text(delta)} is below the mass of infinite privacy loss of this ledger, "
                "so no "
                "finite ε exists in the PLD's range; use a larger δ or the rdp accountant"
            )
        return max(float(eps), 0.0)

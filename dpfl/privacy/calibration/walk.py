"""Searching group privacy on few RDP orders: a walk over the grid from each party's last minimum."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dpfl.errors import AccountingError
from dpfl.privacy.accountants import accountant_class, rdp_pruned
from dpfl.privacy.accountants.base import Unsupported
from dpfl.privacy.calibration.target import Target
from dpfl.privacy.events import ComposedEvent, Event, GroupEvent, ParallelEvent, SelfComposedEvent


@dataclass
class Walk:
    """Where each party's walk over the RDP grid last stopped (`rdp_pruned.walked_epsilon`)."""

    target: Target
    near: dict[int, float]

    START = 16.0  # an order in the middle of where group privacy's minima lie (ε from 0.5 to 10)

    @classmethod
    def of(cls, target: Target, events: Sequence[Event] | None) -> Walk | None:
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

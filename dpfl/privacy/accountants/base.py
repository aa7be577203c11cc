"""The accountant interface and its registry.

An accountant composes events and answers ε for a δ. It is stateful, like
`dp_accounting.PrivacyAccountant`: `compose` adds events, `epsilon` reads the total.
`compose` checks the whole event first (a dry run, `supports`) and raises
`UnsupportedEventError` naming the offending sub-event, so a refused event leaves the
accountant unchanged. An accountant that cannot give a trustworthy ε raises
`AccountingError`; it never returns a wrong or zero ε.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np

from dpfl.errors import UnsupportedEventError
from dpfl.privacy.events import Event
from dpfl.registry import Registry

__all__ = [
    "ACCOUNTANTS",
    "Accountant",
    "Unsupported",
    "accountant_class",
    "headline_problem",
    "make_accountant",
    "registered_accountants",
]


class Unsupported(Exception):
    """Internal signal from an event walk: `event` cannot be accounted, for `reason`."""

    def __init__(self, event: Event, reason: str):
        super().__init__(reason)
        self.event = event
        self.reason = reason


class Accountant(abc.ABC):
    """Composes privacy events and converts the total to (ε, δ)-DP.

    Subclasses implement `_check` (raise `Unsupported` for an event they cannot account),
    `_compose` and `epsilon`. `approximate` becomes True once an event was accounted with an
    approximation that can underestimate ε (e.g. the GDP central limit theorem); `notes` says
    what a reader of the ε must know (approximations, data dependence).

    Two class flags say whether an accountant can give a run's headline ε (the number shown,
    calibrated on and charged to budgets; see `headline_problem`): `data_dependent` (its ε
    is computed from private data, so it is not itself DP) and `approximates` (some events
    are accounted by an approximation; `approximation(event)` says which).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    data_dependent: ClassVar[bool] = False
    approximates: ClassVar[bool] = False
    # The smallest noise multiplier this accountant evaluates in bounded time and memory (None:
    # any). Runs, projections and calibration below it are refused, naming the field.
    min_noise_multiplier: ClassVar[float | None] = None

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.approximate = False

    def _note(self, text: str, *, approximate: bool = False) -> None:
        if text not in self.notes:
            self.notes.append(text)
        self.approximate = self.approximate or approximate

    def supports(self, event: Event) -> bool:
        """Returns whether `event` can be composed (a dry run; nothing changes)."""
        try:
            self._check(event)
        except Unsupported:
            return False
        return True

    def approximation(self, event: Event) -> str | None:
        """Returns why accounting `event` would be approximate (may underestimate ε), or None if exact.

        A dry run, like `supports`: nothing changes.
        """
        return None

    def compose(self, event: Event, count: int = 1) -> None:
        """Adds `event`, repeated `count` times; raises UnsupportedEventError naming the sub-event."""
        self._require([event])
        self._compose(event, count)

    def _require(self, events: Sequence[Event]) -> None:
        """Raises UnsupportedEventError naming the first sub-event that cannot be accounted."""
        for event in events:
            try:
                self._check(event)
            except Unsupported as exc:
                raise UnsupportedEventError(self.name, exc.event, exc.reason) from None

    def epsilon_curve(self, events: Sequence[Event], counts: np.ndarray, *, delta: float) -> np.ndarray:
        """Returns the cumulative ε after each round, starting from this accountant's state.

        Args:
            events: the distinct events of a history.
            counts: [rounds, len(events)] how often each event was released in each round.
            delta: target δ.

        The default composes round by round; accountants with a cheaper closed form override it.
        """
        self._require(events)  # all first, so a refused history leaves the state unchanged
        out = np.empty(len(counts))
        for i, row in enumerate(counts):
            for event, n in zip(events, row, strict=True):
                if n:
                    self._compose(event, int(n))
            out[i] = self.epsilon(delta)
        return out

    @abc.abstractmethod
    def _check(self, event: Event) -> None:
        """Raises `Unsupported` (with the sub-event) if `event` cannot be accounted."""

    @abc.abstractmethod
    def _compose(self, event: Event, count: int) -> None:
        """Adds an event that `_check` accepted."""

    @abc.abstractmethod
    def epsilon(self, delta: float) -> float:
        """Returns the ε of everything composed so far at this δ."""


def headline_problem(name: str, events: Iterable[Event]) -> str | None:
    """Returns why accountant `name` cannot give the headline ε of `events`, or None if it can.

    The headline ε calibrates σ, is charged to budgets and is what a run reports, so it must
    be a sound, data-independent bound (DESIGN.md, "Privacy integrity"): a data-dependent
    accountant (`pate`) or one that approximates any of the events (`gdp`'s CLT for
    Poisson-sampled Gaussians) is refused; their numbers may only be shown beside it, labelled.
    The text completes a sentence starting with the field's name; callers add the value found.
    """
    cls = accountant_class(name)
    if cls.data_dependent:
        return (
            f"must be data-independent: {name!r} is data-dependent (its ε is computed from the "
            "noiseless vote histograms, so it is not itself differentially private); the headline ε "
            f"uses a data-independent accountant such as {_HEADLINE_EXAMPLES}, and the data-dependent "
            "bound is reported beside it"
        )
    if cls.approximates:
        accountant = cls()
        reasons = list(dict.fromkeys(r for e in events if (r := accountant.approximation(e)) is not None))
        if reasons:
            return (
                f"must account every planned release exactly; {name!r} would not: {'; '.join(reasons)}. "
                f"An approximate ε can neither calibrate σ nor be the headline ε; use {_HEADLINE_EXAMPLES}"
            )
    return None


_HEADLINE_EXAMPLES = "rdp or pld"  # sound and data-independent for every event kind but ApproxDP (pld only)


def _accountant_entry(name: str, cls: type[Accountant]) -> type[Accountant]:
    cls.name = name
    return cls


ACCOUNTANTS: Registry[type[Accountant]] = Registry(
    "accountant", _accountant_entry, field="privacy.accountant"
)
"""Every accountant, by name: ``@ACCOUNTANTS.register("rdp")`` above the class registers it."""


def registered_accountants() -> list[str]:
    """Returns the names of every registered accountant."""
    return ACCOUNTANTS.names()


def accountant_class(name: str) -> type[Accountant]:
    """Returns the class registered under `name`; raises UnknownNameError listing the names."""
    return ACCOUNTANTS[name]


def make_accountant(name: str, **options) -> Accountant:
    """Returns a fresh, empty accountant of the registered kind `name`."""
    return accountant_class(name)(**options)

"""Errors a user of the science library can cause, one type per kind.

Every message follows one formula: what is wrong, the value found, and what is
allowed or what to do. Value errors also subclass `ValueError`, so callers that
only know the standard library still catch them.
"""

from __future__ import annotations

__all__ = [
    "AccountingError",
    "DatasetUnavailable",
    "DpflError",
    "PluginError",
    "SpecError",
    "UnknownNameError",
    "UnsupportedEventError",
]


class DpflError(Exception):
    """Base class of every error this library raises on purpose."""

    def __reduce__(self):
        # Pickles whole, whatever a subclass's __init__ takes: the API projects in a process of
        # its own (backend/privacy/bounded.py) and re-raises that process's errors.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type[DpflError], args: tuple, state: dict) -> DpflError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class SpecError(DpflError, ValueError):
    """A value in a run description is out of range or of the wrong kind.

    Attributes:
        field: dotted path of the offending field, e.g. ``privacy.delta``.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"`{field}` {message}")
        self.field = field
        self.reason = message


class UnknownNameError(DpflError, ValueError):
    """A name was looked up in a registry that does not hold it.

    Attributes:
        field: the spec field that named it (e.g. ``model.name``), or None outside a spec.
    """

    def __init__(self, kind: str, name: str, known: list[str], *, field: str | None = None):
        super().__init__(f"unknown {kind} {name!r}; registered: {', '.join(sorted(known))}")
        self.kind = kind
        self.field = field
        self.name = name
        self.known = sorted(known)


class UnsupportedEventError(DpflError, ValueError):
    """An accountant cannot compose an event; names the sub-event that caused it."""

    def __init__(self, accountant: str, event: object, reason: str = ""):
        kind = type(event).__name__
        extra = f": {reason}" if reason else ""
        super().__init__(f"accountant {accountant!r} cannot account {kind}{extra} (caused by {event!r})")
        self.accountant = accountant
        self.event = event


class AccountingError(DpflError):
    """An accountant cannot give a trustworthy ε for this ledger (never a wrong or zero ε)."""


class DatasetUnavailable(DpflError):
    """A dataset's files are missing and cannot be fetched; says which files go where."""


class PluginError(DpflError, ImportError):
    """A plugin module (DPFL_PLUGINS or a `dpfl.plugins` entry point) cannot be imported."""

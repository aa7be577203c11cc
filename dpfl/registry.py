"""One registry type for every named part a spec can choose.

Algorithms, datasets, models, partition kinds, user kinds and accountants are each a
`Registry`: a name ↦ entry table filled by decorators where the part is defined
(``@ALGORITHMS.register("fedavg")`` above the class). Everything that lists or looks up a
part reads its registry (the runner's checks, GET /api/algorithms and /api/options, the CLI,
the plots' colours, the README check), so a new part is one module and one decorator.

A registry refuses a taken name (two modules must not silently overwrite each other) and a
lookup of an unknown name raises `UnknownNameError` listing the registered names, which the
API and the CLI show as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from dpfl.errors import UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")
D = TypeVar("D")


class Registry(Generic[T]):
    """Names ↦ entries of one kind of part.

    Args:
        kind: what the entries are, as messages name it ("algorithm", "partition kind").
        field: the spec field that names an entry (``model.name``), which an unknown name's
            error points at (the API's 422 `loc`).
        entry: builds the stored entry from the decorated object, its name and the decorator's
            keywords (e.g. a dataset's description and files); by default the object itself.
            It may raise ValueError to refuse a malformed part at import time.
    """

    def __init__(self, kind: str, entry: Callable[..., T] | None = None, *, field: str):
        self.kind = kind
        self.field = field
        self._entry = entry
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}  # where each decorated part is defined, for the refusal

    def register(self, name: str, **metadata: Any) -> Callable[[D], D]:
        """Returns a decorator registering the object it decorates under `name`, unchanged."""

        def add(obj: D) -> D:
            self.add(name, self._entry(name, obj, **metadata) if self._entry else obj)
            self._origins[name] = f"{obj.__module__}.{obj.__qualname__}"
            return obj

        return add

    def add(self, name: str, entry: T) -> T:
        """Registers `entry` under `name`; raises ValueError if the name is taken."""
        if name in self._entries:
            origin = self._origins.get(name)
            raise ValueError(
                f"{self.kind} {name!r} is already registered" + (f" by {origin}" if origin else "")
            )
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Unregisters `name` (for a part registered at test time); unknown names are refused."""
        self[name]
        del self._entries[name]
        self._origins.pop(name, None)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._entries), field=self.field) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Returns the registered names, sorted."""
        return sorted(self._entries)

"""Sweeps: the cartesian product of field values over a base spec, as run spec dicts.

Grid keys are dotted spec field paths (`algorithm`, `privacy.epsilon`, `params.lr`, `seed`),
each with a list of JSON values; a point is the base with one value of every key set.

- `base.params_by_algorithm[name]` is merged into `params` for the points of algorithm
  `name`, under the grid's own `params.*` values, so parameters that only one algorithm
  knows (`clip`) can sit beside shared ones (`lr`).
- `base.model_by_algorithm[name]` replaces `model` for the points of algorithm `name`, so a
  sweep can set logistic-regression algorithms (`gdp_gd`) beside MLP ones; the grid's own
  `model.*` values still apply on top.
- A point whose algorithm is not private (notion "none", e.g. `fedavg`) drops `privacy` and
  every `privacy.*` key, and identical points are kept once: a sweep over ε that includes
  `fedavg` runs it once per seed, the reference line, not once per ε.

Errors are `PointError`s placing the field in the request body: ("grid", key) for a grid
key, ("base", ...) for the base spec.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpfl.errors import SpecError, UnknownNameError

__all__ = ["MODEL_BY_ALGORITHM", "PER_ALGORITHM", "Point", "PointError", "expand", "locate"]

PER_ALGORITHM = "params_by_algorithm"
MODEL_BY_ALGORITHM = "model_by_algorithm"
_BY_ALGORITHM = {PER_ALGORITHM: "params", MODEL_BY_ALGORITHM: "model"}  # base key → the spec field it sets
_EXPANSION_FACTOR = 20  # how far duplicates may shrink a grid before it is refused unexpanded


class PointError(SpecError):
    """A sweep field is invalid; `loc` places it in the request body (("grid", key) or ("base", ...))."""

    def __init__(self, loc: Sequence[str], message: str):
        super().__init__(".".join(loc), message)
        self.loc = tuple(loc)


@dataclass(frozen=True)
class Point:
    """One run of a sweep: the grid values it sets (after the non-private rule) and its spec dict."""

    overrides: dict[str, Any]
    data: dict[str, Any]

    @property
    def algorithm(self) -> Any:
        """Returns the point's algorithm name (as given; not yet validated)."""
        return self.data.get("algorithm")


def expand(base: Mapping[str, Any], grid: Mapping[str, Any], *, max_points: int) -> list[Point]:
    """Returns the distinct points of the grid over `base`, in grid order (the last key varies fastest).

    Raises:
        PointError: a grid key or value list is malformed, `params_by_algorithm` names an
            unknown algorithm, or there are more than `max_points` points.
    """
    _check_grid(grid)
    per_algorithm = {key: _per_algorithm(base, key) for key in _BY_ALGORITHM}
    combinations = math.prod(len(values) for values in grid.values())
    if combinations > max_points * _EXPANSION_FACTOR:
        raise _too_many(combinations, max_points)
    keys = list(grid)
    distinct: dict[str, Point] = {}
    for values in itertools.product(*(grid[k] for k in keys)):
        point = _point(base, per_algorithm, dict(zip(keys, values, strict=True)))
        distinct.setdefault(json.dumps(point.data, sort_keys=True), point)
    if len(distinct) > max_points:
        raise _too_many(len(distinct), max_points)
    return list(distinct.values())


def locate(field: str, point: Point, base: Mapping[str, Any]) -> tuple[str, ...]:
    """Returns where a bad spec field of `point` came from: ("grid", key) or ("base", *path)."""
    parts = field.split(".")
    owners = [
        key
        for key in point.overrides
        if field == key or field.startswith(f"{key}.") or key.startswith(f"{field}.")
    ]
    if owners:
        return ("grid", max(owners, key=len))
    algorithm = point.algorithm if isinstance(point.algorithm, str) else None
    own_params = (base.get(PER_ALGORITHM) or {}).get(algorithm)
    if parts[0] == "params" and len(parts) > 1 and isinstance(own_params, Mapping) and parts[1] in own_params:
        return ("base", PER_ALGORITHM, algorithm, *parts[1:])
    if parts[0] == "model" and isinstance((base.get(MODEL_BY_ALGORITHM) or {}).get(algorithm), Mapping):
        return ("base", MODEL_BY_ALGORITHM, algorithm, *parts[1:])
    return ("base",) if field == "spec" else ("base", *parts)


def _too_many(count: int, limit: int) -> PointError:
    return PointError(
        ("grid",),
        f"has {count} points; a sweep may have at most {limit} on this server. "
        "Give fewer values or split the sweep.",
    )


def _check_grid(grid: Mapping[str, Any]) -> None:
    for key, values in grid.items():
        if not key or "" in key.split("."):
            raise PointError(
                ("grid", key), f"must be a dotted spec field such as `privacy.epsilon`; got {key!r}."
            )
        if key.split(".")[0] in _BY_ALGORITHM:
            raise PointError(("grid", key), f"cannot be swept; set `{key.split('.')[0]}` in `base`.")
        if not isinstance(values, list):
            raise PointError(("grid", key), f"must be a list of values; got {values!r}.")
        if not values:
            raise PointError(("grid", key), "must list at least one value; got [].")
        for other in grid:
            if other.startswith(f"{key}."):
                raise PointError(("grid", other), f"overlaps the grid key `{key}`; sweep each field once.")


def _algorithm_class(name: str) -> Any:
    # imported when a grid is expanded, so that naming the papers (`dpfl --help`) needs no torch
    from dpfl.algorithms import algorithm_class

    return algorithm_class(name)


def _per_algorithm(base: Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """Returns `base[key]` (`params_by_algorithm` or `model_by_algorithm`), checked: names → mappings."""
    raw = base.get(key)
    noun = _BY_ALGORITHM[key]
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PointError(("base", key), f"must map algorithm names to their {noun}; got {raw!r}.")
    for name, value in raw.items():
        try:
            _algorithm_class(name)
        except UnknownNameError as exc:
            raise PointError(("base", key, name), str(exc)) from None
        if not isinstance(value, Mapping):
            raise PointError(("base", key, name), f"must be a mapping of {noun} fields; got {value!r}.")
    return {name: dict(value) for name, value in raw.items()}


def _notion(algorithm: Any, overrides: Mapping[str, Any]) -> str | None:
    if not isinstance(algorithm, str):
        return None  # the spec's own validation names the field
    try:
        return _algorithm_class(algorithm).notion
    except UnknownNameError as exc:
        raise PointError(
            ("grid", "algorithm") if "algorithm" in overrides else ("base", "algorithm"), str(exc)
        ) from None


def _point(
    base: Mapping[str, Any],
    per_algorithm: Mapping[str, Mapping[str, dict[str, Any]]],
    overrides: dict[str, Any],
) -> Point:
    algorithm = overrides.get("algorithm", base.get("algorithm"))
    data = copy.deepcopy({k: v for k, v in base.items() if k not in _BY_ALGORITHM})
    if isinstance(algorithm, str):
        params = data.get("params") or {}
        own = per_algorithm[PER_ALGORITHM].get(algorithm)
        if own and isinstance(params, Mapping):  # anything else is left for the spec to refuse
            data["params"] = {**params, **own}
        if (model := per_algorithm[MODEL_BY_ALGORITHM].get(algorithm)) is not None:
            data["model"] = copy.deepcopy(model)
    if _notion(algorithm, overrides) == "none":
        data.pop("privacy", None)
        overrides = {k: v for k, v in overrides.items() if k != "privacy" and not k.startswith("privacy.")}
    for key, value in overrides.items():
        _set(data, key, copy.deepcopy(value))
    return Point(overrides, data)


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    *parents, leaf = key.split(".")
    for part in parents:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise PointError(
                ("grid", key), f"cannot be set: `{part}` is {child!r} in the base, not a mapping."
            )
        node = child
    node[leaf] = value

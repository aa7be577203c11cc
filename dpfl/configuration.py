"""What makes runs one configuration, so that a comparison averages only over seeds.

Two runs are the same configuration when their resolved specs (defaults filled in, the
algorithm's params validated) agree in every field but the seed and the privacy target, the
axis a comparison plots (ε, σ or μ). Anything else that differs (δ, a learning rate, the
rounds, the dataset's options) makes them different configurations: their points are not
averaged together, and the fields that differ among one algorithm's runs name each one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from dpfl.algorithms import algorithm_class
from dpfl.errors import DpflError
from dpfl.formats import number_text
from dpfl.spec import parse_spec

__all__ = ["AXIS", "Configuration", "configurations", "varying_fields"]

AXIS = frozenset({"seed", "privacy.epsilon", "privacy.noise_multiplier", "privacy.mu"})
"""The fields a comparison varies along its x axis or averages over: never part of a configuration."""

_SHORT = {"privacy.delta": "δ", "privacy.accountant": "accountant", "dataset.name": "dataset"}


class Configuration(NamedTuple):
    """A run's configuration among others: `key`, canonical, equal for runs that differ only in
    seed and target; `label`, the fields that differ from the same algorithm's other runs, in
    words ("" when none do)."""

    key: str
    label: str


def configurations(
    specs: Mapping[str, Mapping[str, Any]], *, averaged: Collection[str] = ()
) -> dict[str, Configuration]:
    """Returns run id ↦ its configuration, for the runs of `specs` (run id ↦ stored spec).

    The label names the fields whose values differ among the runs of the same algorithm, e.g.
    "δ = 0.1 · lr = 2"; fields another algorithm has are not a difference. `averaged`: fields the
    user chose to average over, as over seeds; they then join no key, and the label of runs that
    differ in them ends "averaged over lr" (never averaged over silently).
    """
    every = {run_id: _fields(spec) for run_id, spec in specs.items()}
    fields = {run_id: {k: v for k, v in f.items() if k not in averaged} for run_id, f in every.items()}
    out = {}
    for run_ids in _by_algorithm(specs):
        varying = _varying(fields, run_ids)
        over = [k for k in _varying(every, run_ids) if k in averaged]
        for run_id in run_ids:
            own = fields[run_id]
            parts = [f"{_name(k)} = {_text(own.get(k))}" for k in varying]
            if over:
                parts.append("averaged over " + ", ".join(_name(k) for k in over))
            out[run_id] = Configuration(_canonical(own), " · ".join(parts))
    return out


def varying_fields(specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Returns the fields (dotted, sorted) that differ among some algorithm's runs of `specs`: the
    ones a comparison can be told to average over."""
    fields = {run_id: _fields(spec) for run_id, spec in specs.items()}
    return sorted({k for run_ids in _by_algorithm(specs) for k in _varying(fields, run_ids)})


def _by_algorithm(specs: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """Returns the run ids of each algorithm: fields only differ among one algorithm's runs."""
    groups: dict[str, list[str]] = defaultdict(list)
    for run_id, spec in specs.items():
        groups[str(spec.get("algorithm"))].append(run_id)
    return list(groups.values())


def _varying(fields: Mapping[str, Mapping[str, Any]], run_ids: Sequence[str]) -> list[str]:
    """Returns the fields whose values differ among `run_ids`, sorted."""
    keys = sorted({k for i in run_ids for k in fields[i]})
    return [k for k in keys if len({_canonical(fields[i].get(k)) for i in run_ids}) > 1]


def _fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the spec's fields as dotted keys, resolved where it parses, without the axis."""
    try:
        spec = parse_spec(dict(raw))
        resolved = spec.to_json()
        resolved["params"] = algorithm_class(spec.algorithm).parse_params(spec.params).model_dump(mode="json")
    except (DpflError, ValueError):  # a spec stored under an older schema: compared as stored
        resolved = dict(raw)
    flat: dict[str, Any] = {}
    _flatten(resolved, "", flat)
    return {k: v for k, v in flat.items() if k not in AXIS}


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """Adds the leaves of `value` under dotted keys; an empty mapping adds nothing (as absent)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(v, f"{prefix}{k}.", out)
    else:
        out[prefix.removesuffix(".")] = value


def _name(field: str) -> str:
    """Returns a field as a legend names it: δ, lr, pca, or its dotted path."""
    return _SHORT.get(field, field.removeprefix("params.").removeprefix("dataset.features."))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _text(value: Any) -> str:
    """Returns a value as a legend shows it: numbers in one format (1e-5, 0.1, 2)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number_text(value)
    return value if isinstance(value, str) else _canonical(value)

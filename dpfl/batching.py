"""Which runs can train together: one batch per algorithm, params, data, model and schedule.

Runs that differ only in their privacy target, noise multiplier or seed share everything a round
is computed from except σ and randomness, so a family that vectorises over runs
(`Algorithm.batched`) trains them in one computation, with a run axis beside its silos
(`Algorithm.round_many`). Sweeps are grouped here, at submission, the same way in the service
and in `dpfl reproduce`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence

from dpfl.spec import RunSpec

__all__ = ["DEFAULT_BATCH_RUNS", "FREE_FIELDS", "batch_key", "batches"]

# the spec fields runs of one batch may differ in
FREE_FIELDS = ("seed", "privacy.epsilon", "privacy.mu", "privacy.noise_multiplier")
# Eight runs of the MNIST spec (25 silos each) make 200 models per gradient call; smaller
# batches leave a sweep's other batches to other workers.
DEFAULT_BATCH_RUNS = 8


def batch_key(spec: RunSpec) -> str | None:
    """Returns the key runs must share to train together, or None when the spec's algorithm
    does not vectorise over runs (it then trains alone)."""
    from dpfl.algorithms import algorithm_class  # the spec's own check names an unknown one

    if not algorithm_class(spec.algorithm).batched:
        return None
    data = spec.to_json()
    for field in FREE_FIELDS:
        *parents, leaf = field.split(".")
        node = data
        for part in parents:
            node = node.get(part) or {}
        node.pop(leaf, None)
    return json.dumps(data, sort_keys=True)


def batches(specs: Sequence[RunSpec], *, max_runs: int = DEFAULT_BATCH_RUNS) -> list[list[int]]:
    """Returns the specs' indices grouped into batches of at most `max_runs`, in order of first
    appearance; runs of one key are split into batches whose sizes differ by at most one, and a spec without a
    key is a batch of its own."""
    if max_runs < 1:
        raise ValueError(f"max_runs must be ≥ 1; got {max_runs}")
    by_key: dict[str, list[int]] = {}
    groups: list[list[int]] = []
    for i, spec in enumerate(specs):
        key = batch_key(spec)
        if key is None:
            groups.append([i])
        elif key not in by_key:
            by_key[key] = [i]
            groups.append(by_key[key])
        else:
            by_key[key].append(i)
    out = []
    for group in groups:
        parts = math.ceil(len(group) / max_runs)
        size, extra = divmod(len(group), parts)  # the first `extra` batches take one run more
        bounds = [k * size + min(k, extra) for k in range(parts + 1)]
        out += [group[a:b] for a, b in itertools.pairwise(bounds)]
    return out

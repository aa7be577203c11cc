"""An in-process cache of noiseless vote histograms, keyed by what determines them.

The histograms (reference/003_voting_dpfl.md §6.1) are the costly part of a voting run
(training N local models, or N batched kNN searches) and do not depend on σ, Q, δ or the
privacy level. So a sweep over σ or ε in one process (a worker, a notebook, the reproduction
script) computes them once. The key is a digest of everything that determines them: dataset,
partition, seed, public pool size and the votes' own parameters (the local models' training,
or k and the feature map), plus a version that changes whenever the computation does.

The cache lives in memory (least recently used entries go first) and is never written to
disk: algorithms do no I/O. A run says whether it was served from the cache (the round
metric `votes_cached`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["cached_votes", "clear_vote_cache", "vote_cache_key"]

_VERSION = 1
_MAX_ENTRIES = 32  # a 3,000 × 10 histogram is 240 kB
_CACHE: OrderedDict[str, np.ndarray] = OrderedDict()
_LOCK = threading.Lock()


def vote_cache_key(parts: Mapping[str, Any]) -> str:
    """Returns the digest of `parts` (JSON-serialisable), stable across processes."""
    text = json.dumps({"version": _VERSION, **parts}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def cached_votes(key: str, rows: int, compute: Callable[[int], np.ndarray]) -> tuple[np.ndarray, bool]:
    """Returns (histograms of the first `rows` public records, whether they came from the cache).

    A cached entry serves any run that needs at most as many rows (queries are a prefix of
    the pool); otherwise `compute(rows)` runs and replaces it. The returned array is
    read-only, so no caller can alter what another run will read.
    """
    with _LOCK:
        if key in _CACHE and len(_CACHE[key]) >= rows:
            _CACHE.move_to_end(key)
            return _CACHE[key][:rows], True
    votes = np.array(compute(rows), dtype=np.float64)
    votes.setflags(write=False)
    with _LOCK:
        _CACHE[key] = votes
        _CACHE.move_to_end(key)
        while len(_CACHE) > _MAX_ENTRIES:
            _CACHE.popitem(last=False)
    return votes, False


def clear_vote_cache() -> None:
    """Empties the cache (tests use it to time or compare a fresh computation)."""
    with _LOCK:
        _CACHE.clear()

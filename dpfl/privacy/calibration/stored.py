"""A run's projection (its σ and planned ε per round) stored on disk, for a fresh process that runs
a spec again.

A second `dpfl run` of the MNIST spec spent 0.65 s of its 3 s outside training calibrating 25 silos'
σ and computing their planned ε per round, the same numbers as the first run's (issue 19: < 3 s).
So `start` keeps them in `<cache_dir>/projections/<key>.json` for simulation runs. The key is
everything they depend on: the spec, the plan's events at one σ (the data's sampling rates), the
source of this package and dp-accounting's version, so any change of code reads nothing stored.
Protected runs never read or write here (their schedules come from data with a budget), and a
run's ε is always accounted afresh from what it released.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path

__all__ = ["projection_key", "read_projection", "write_projection"]

_PACKAGE = Path(__file__).resolve().parents[2]  # dpfl/


@functools.cache
def _code() -> str:
    digest = hashlib.sha256(metadata.version("dp-accounting").encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def projection_key(spec_json: str, plan: object) -> str:
    """Returns the key of a projection: the spec, the plan's events (their repr holds every float
    exactly) and the code that computes it."""
    return hashlib.sha256(repr((_code(), spec_json, plan)).encode()).hexdigest()[:32]


def read_projection(folder: Path, key: str) -> tuple[float | list[float], list[float]] | None:
    """Returns the stored (σ, planned ε per round) under `key`, or None when there is none readable."""
    try:
        data = json.loads((folder / f"{key}.json").read_text())
        return data["noise_multiplier"], [float(e) for e in data["planned"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_projection(folder: Path, key: str, sigma: float | list[float], planned: list[float]) -> None:
    """Stores a projection atomically; a folder it cannot write to only costs the next run the time."""
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".json", delete=False) as tmp:
            json.dump({"noise_multiplier": sigma, "planned": planned}, tmp)
        os.replace(tmp.name, folder / f"{key}.json")
    except OSError:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)

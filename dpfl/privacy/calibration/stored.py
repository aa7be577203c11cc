"""A run's projection (its σ and planned ε per round) stored on disk, for a fresh process that runs
a spec again.

A second `dpfl run` of the MNIST spec spent 0.65 s of its 3 s outside training calibrating 25 silos'
σ and computing their planned ε per round, the same numbers as the first run's (issue 19: < 3 s).
So `start` keeps them in `<cache_dir>/projections/<key>.json` for simulation runs. The key is
everything they depend on: the spec, the plan's events at one σ (the data's sampling rates), the
source of this package as it was imported, and the versions of dp-accounting, scipy and numpy, so
any change of code reads nothing stored. Beside them, the RDP values dp_accounting computed for the
plan's events (exact events, by order): a fresh process of a stored spec still accounts its ledger
after the run, and dp_accounting's 900 evaluations of orders took 0.3 s of its 0.36 s outside
training (issue 43); read back, they stand in for those very calls (`rdp.remember_orders`), so a
simulation's ledger ε rests on this folder as its σ does. A plugin's source is not in the key,
so a run whose algorithm or accountant a plugin defines is never stored (`storable`). Protected
runs never read or write here (their schedules come from data with a budget), and a run's ε is
always accounted afresh from what it released.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from dpfl.privacy.events import Event, from_json, to_json

__all__ = ["projection_key", "read_projection", "storable", "store_of", "write_projection"]


def _code() -> str:
    package = Path(__file__).resolve().parents[2]  # dpfl/
    versions = [metadata.version(name) for name in ("dp-accounting", "scipy", "numpy")]
    digest = hashlib.sha256(repr(versions).encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# Read once, as the package is imported (~7 ms): a source tree edited under a running worker
# must not file the old code's results under the new code's key.
_CODE = _code()


def store_of(cache_dir: Path) -> Path:
    """Returns the folder of stored projections under a download folder."""
    return Path(cache_dir) / "projections"


def storable(*classes: type) -> bool:
    """Returns whether a projection computed by these classes (the algorithm's, the accountant's)
    may be stored: only when this package defines them, since only its source is in the key."""
    return all(c.__module__.split(".")[0] == "dpfl" for c in classes)


def projection_key(spec_json: str, plan: object) -> str:
    """Returns the key of a projection: the spec, the plan's events (their repr holds every float
    exactly) and the code that computes it."""
    return hashlib.sha256(repr((_CODE, spec_json, plan)).encode()).hexdigest()[:32]


def read_projection(
    folder: Path, key: str, *, rounds: int, silos: int
) -> tuple[float | list[float], list[float], list[tuple[Event, dict[float, float]]]] | None:
    """Returns the stored (σ, planned ε per round, RDP values by event) under `key`, or None when
    there is none that fits the run (one finite σ > 0, or one per silo; one ε per round). RDP
    values that do not parse are left out (the accountant computes them)."""
    try:
        data = json.loads((folder / f"{key}.json").read_text())
        sigma, planned = data["noise_multiplier"], [float(e) for e in data["planned"]]
        sigmas = [float(s) for s in sigma] if isinstance(sigma, list) else [float(sigma)]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    fits = len(planned) == rounds and len(sigmas) in (1, silos) and not isinstance(sigma, bool)
    if not fits or not all(math.isfinite(s) and s > 0 for s in sigmas):
        return None
    try:
        rdp = [(from_json(e), {float(a): float(v) for a, v in values}) for e, values in data.get("rdp", [])]
    except (ValueError, TypeError):  # SpecError is a ValueError
        rdp = []
    return sigma if isinstance(sigma, list) else float(sigma), planned, rdp


def write_projection(
    folder: Path,
    key: str,
    sigma: float | list[float],
    planned: list[float],
    rdp: Sequence[tuple[Event, dict[float, float]]] = (),
) -> None:
    """Stores a projection atomically; a folder it cannot write to only costs the next run the time."""
    tmp = None
    stored_rdp = [[to_json(e), sorted(values.items())] for e, values in rdp]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".json", delete=False) as tmp:
            json.dump({"noise_multiplier": sigma, "planned": planned, "rdp": stored_rdp}, tmp)
        os.replace(tmp.name, folder / f"{key}.json")
    except OSError:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)

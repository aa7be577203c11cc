"""Settings a spec may give, that run, and whose result misleads: said before the run, not refused.

Each is a sentence for the new-run form (and the projection's API answer): what was given, what
it means on this data, and what would be meant instead. A rule two layers need lives here, in the
one projection (`dpfl.projection.project`), so the preview and admission say the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dpfl.algorithms.base import Algorithm

__all__ = ["implausible"]

# the unit a notion protects, as counted on the data (singular, plural)
_UNITS = {"user": ("user", "users"), "agent": ("agent", "agents")}


def implausible(algorithm: Algorithm) -> list[str]:
    """Returns why the run's settings are implausible on its data, one sentence each (none: [])."""
    spec, data = algorithm.spec, algorithm.data
    records = sum(len(rows) for rows in data.silos)
    out = []
    users = None  # the users who hold a record: the unit user-level DP protects here
    if data.users is not None:
        allocated = data.users.num_users
        users = len(np.unique(np.concatenate([np.asarray(ids) for ids in data.users.user_ids])))
        if allocated > records:
            out.append(
                f"{allocated:,} users for {records:,} training records: most users hold no record, so a "
                "user-level ε protects people the data does not have; allocate at most as many users as "
                "records"
            )
    privacy = spec.privacy
    if privacy is not None and algorithm.private:
        one, many = _UNITS.get(algorithm.notion, ("record", "training records"))
        n = users if one == "user" else len(data.silos) if one == "agent" else records
        if n and privacy.delta >= 1 / n:
            out.append(
                f"δ = {privacy.delta:g} is at least 1/n = 1/{n:,} (n: the {many}): a mechanism that "
                f"publishes one {one} outright with probability δ meets it; take δ well below 1/n, "
                f"e.g. {_below(n):g}"
            )
    rate = getattr(algorithm.params, "sample_rate", None)
    if isinstance(rate, float) and rate * len(data.silos) < 1:
        expected = rate * len(data.silos)
        out.append(
            f"sample_rate {rate:g} × {len(data.silos)} agents = {expected:.2g} agents expected per round: "
            "most rounds release the noise alone; raise sample_rate or the agents"
        )
    return out


def _below(n: int) -> float:
    """A δ well below 1/n: the largest power of ten at most 1/(10 n)."""
    exponent = 1
    while 10**exponent < 10 * n:
        exponent += 1
    return 10.0**-exponent

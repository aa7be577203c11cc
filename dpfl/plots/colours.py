"""One colour per algorithm, the same in every chart, process and release.

A colour comes from ``blake2b(name)``, never from Python's ``hash`` (salted per process) and
never from the order in which names happen to appear in a chart, so the dashboard, the offline
report and a screenshot taken next year agree.

A hash alone cannot keep a handful of names apart: twelve colours take ten names without a clash
only about 0.4% of the time (the birthday problem). So the names we expect to compare are listed in
``_CATALOGUE`` and placed by hash with linear probing, which makes them distinct by construction.
The list is append-only: adding a name never moves an earlier one. A name outside it falls back to
its bare hash slot and may share a colour with another algorithm.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["NEUTRAL_COLOUR", "algorithm_colour"]

# The first seven are Okabe & Ito's colour-blind-safe set (without black, which marks the Pareto
# frontier); the other five are the members of Paul Tol's "muted" scheme that stay apart from them.
_PALETTE = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#F0E442",  # yellow
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#332288",  # indigo
    "#882255",  # wine
    "#999933",  # olive
    "#44AA99",  # teal
    "#CC6677",  # rose
)

NEUTRAL_COLOUR = "#4D4D4D"
"""Dark grey of the non-private reference, so it reads as a baseline rather than a contender."""

_NON_PRIVATE = frozenset({"fedavg"})

# Append-only: never edit or reorder an entry, since probing would move the names after it. Besides the
# registered keys it holds the expected keys of algorithms DESIGN.md plans; one registered under another
# key is appended.
_CATALOGUE = (
    "isrl_mbsgd",
    "isrl_localsgd",
    "isrl_spider",
    "isrl_proxsgd",
    "gdp_localnewton",
    "gdp_gd",
    "ae_dpfl",
    "knn_dpfl",
    "dp_fedavg",
    "dp_fedsgd",
    "uldp_avg",
    "uldp_sgd",
)

# Colours of the figures that show no algorithm: a run's test and train curves, a highlighted summary.
TEST_COLOUR = _PALETTE[4]
TRAIN_COLOUR = _PALETTE[0]
HIGHLIGHT_COLOUR = _PALETTE[5]
FAINT_GREY = "#808080"


def _hash_slot(name: str) -> int:
    """Returns the palette index ``blake2b(name) mod len(_PALETTE)``."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % len(_PALETTE)


def _probe(names: Sequence[str]) -> dict[str, int]:
    """Returns name ↦ palette index: the hash slot, or the next free one, until the palette is full."""
    slots: dict[str, int] = {}
    for name in names:
        if len(slots) == len(_PALETTE) or name in slots:
            continue
        slot = _hash_slot(name)
        while slot in slots.values():
            slot = (slot + 1) % len(_PALETTE)
        slots[name] = slot
    return slots


_SLOTS = _probe(_CATALOGUE)


def algorithm_colour(name: str) -> str:
    """Returns the hex colour of algorithm `name`: neutral grey for the non-private reference."""
    if name in _NON_PRIVATE:
        return NEUTRAL_COLOUR
    slot = _SLOTS.get(name)
    return _PALETTE[_hash_slot(name) if slot is None else slot]


def _translucent(colour: str, alpha: float) -> str:
    """Returns ``rgba(r, g, b, alpha)`` for a ``#RRGGBB`` colour (bands and faint lines)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"

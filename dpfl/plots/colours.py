"""One colour per algorithm, the same in every chart, process and release.

A colour comes from ``blake2b(name)``, never from Python's ``hash`` (salted per process) and
never from the order in which names happen to appear in a chart, so the dashboard, the offline
report and a screenshot taken next year agree.

A hash alone cannot keep a handful of names apart: twelve colours take ten names without a clash
only about 0.4% of the time (the birthday problem). So the names we expect to compare are listed in
``_CATALOGUE`` and placed by hash with linear probing, which makes them distinct by construction:
the first twelve in the main palette, the next eight in a second one. The list is append-only:
adding a name never moves an earlier one. A name outside it falls back to its bare hash slot in
the main palette and may share a colour with another algorithm.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from dpfl.algorithms import ALGORITHMS

__all__ = ["NEUTRAL_COLOUR", "algorithm_colour"]

# The first seven are Okabe & Ito's colour-blind-safe set (without black, which marks the Pareto
# frontier); the other five are the members of Paul Tol's "muted" scheme that stay apart from them.
_PALETTE = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#B59B00",  # dark yellow (Okabe & Ito's #F0E442 is unreadable as a line on white)
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#332288",  # indigo
    "#882255",  # wine
    "#999933",  # olive
    "#44AA99",  # teal
    "#CC6677",  # rose
)

# When the catalogue outgrew the palette, the names after the twelfth took colours from this
# second palette (Paul Tol's "muted" and "bright" members not used above), so that no colour
# placed earlier moved.
_EXTRA_PALETTE = (
    "#88CCEE",  # cyan
    "#117733",  # green
    "#AA4499",  # purple
    "#DDCC77",  # sand
    "#661100",  # brown
    "#6699CC",  # steel blue
    "#EE3377",  # magenta
    "#BBBBBB",  # light grey
)

NEUTRAL_COLOUR = "#4D4D4D"
"""Dark grey of the non-private reference, so it reads as a baseline rather than a contender."""

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
    "sdp_mbsgd",
    "uldp_avg_w",
    "uldp_naive",
    "uldp_group",
    "isrl_spider_alt",
    "ae_dpfl_da",
)

# Colours of the figures that show no algorithm: a run's test accuracy, test loss and train curves,
# a highlighted summary.
TEST_COLOUR = _PALETTE[4]
LOSS_COLOUR = _PALETTE[6]
TRAIN_COLOUR = _PALETTE[0]
HIGHLIGHT_COLOUR = _PALETTE[5]
FAINT_GREY = "#808080"


def _hash_slot(name: str, size: int) -> int:
    """Returns the palette index ``blake2b(name) mod size``."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % size


def _probe(names: Sequence[str]) -> dict[str, str]:
    """Returns name ↦ colour: each palette in turn, by hash slot or the next free one, until both are full."""
    colours: dict[str, str] = {}
    for palette in (_PALETTE, _EXTRA_PALETTE):
        taken: set[int] = set()
        for name in names:
            if name in colours or len(taken) == len(palette):
                continue
            slot = _hash_slot(name, len(palette))
            while slot in taken:
                slot = (slot + 1) % len(palette)
            taken.add(slot)
            colours[name] = palette[slot]
    return colours


_COLOURS = _probe(_CATALOGUE)


def algorithm_colour(name: str) -> str:
    """Returns the hex colour of algorithm `name`: neutral grey for the non-private references
    (a registered algorithm whose notion is `none`), so they read as baselines, not contenders."""
    if name in ALGORITHMS and ALGORITHMS[name].notion == "none":
        return NEUTRAL_COLOUR
    return _COLOURS.get(name) or _PALETTE[_hash_slot(name, len(_PALETTE))]


def _translucent(colour: str, alpha: float) -> str:
    """Returns ``rgba(r, g, b, alpha)`` for a ``#RRGGBB`` colour (bands and faint lines)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"

"""What a run discloses: private outputs, diagnostics (not private), and the caveats of its ε.

Every output of a run is one of two kinds (shared/DESIGN.md, "Privacy integrity"):

- *private*: a function of ledgered releases and public data only (the model's test metrics,
  ε, a noise std computed from σ and public parameters). The ledger's ε covers it.
- *diagnostic*: computed from private data without noise (training loss, clip fractions, real
  Poisson batch sizes, label histograms, records per user, noiseless votes, a data-dependent ε).
  The ledger does not cover it. Diagnostics travel in their own block labelled "not private"
  and are withheld for protected datasets.

A round metric is private only when its algorithm names it in `Algorithm.private_metrics`;
anything else is a diagnostic, so a metric added without thought is never served as private.

Caveats say what a run's ε does not cover or rests on: seeded noise in simulation, feature
transforms fitted on the private training rows, trusted components, public data the parties
train on, approximations and data-dependent choices. A caveat that `breaks_guarantee` makes the
run's `guaranteed` false.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DIAGNOSTICS_LABEL", "Caveat", "CaveatKind", "split_metrics"]

DIAGNOSTICS_LABEL = "not private: computed from the private data without noise, not covered by the ledger's ε"

CaveatKind = Literal[
    "simulation",
    "preprocessing",
    "trusted",
    "public_data",
    "approximation",
    "data_dependent",
    "evaluation",
    "unaudited",
    "reported",
]


@dataclass(frozen=True)
class Caveat:
    """One thing a reader of the run's ε must know.

    Attributes:
        kind: `simulation` (noise regenerable from the spec's seed), `preprocessing` (a
            transform fitted on private rows), `trusted` (a component the guarantee trusts),
            `public_data` (public data the parties train on, which the ledger need not cover),
            `approximation`, `data_dependent` (a choice read from private data), or `reported`
            (an external run's ledger, as its own code reported it).
        text: one sentence, for the API, the CLI and the run page.
        breaks_guarantee: True when the ledger's ε does not bound what the run leaks.
    """

    kind: CaveatKind
    text: str
    breaks_guarantee: bool = False

    def to_json(self) -> dict[str, Any]:
        """Returns {"kind", "text", "breaks_guarantee"}."""
        return {"kind": self.kind, "text": self.text, "breaks_guarantee": self.breaks_guarantee}


def split_metrics(
    metrics: Mapping[str, float], private: Iterable[str]
) -> tuple[dict[str, float], dict[str, float]]:
    """Returns (private, diagnostic) metrics: those named in `private`, and all the others."""
    names = frozenset(private)
    return (
        {k: v for k, v in metrics.items() if k in names},
        {k: v for k, v in metrics.items() if k not in names},
    )

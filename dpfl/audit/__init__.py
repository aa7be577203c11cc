"""The empirical privacy auditor: is the ε on the chart true?

Two checks on one round's real releases, caught through the engine's release tap
(`dpfl.engine.release`):

- sensitivity fuzzing (`neighbours`, `fuzz`): run the algorithm's round on adversarial
  neighbouring datasets for its notion with the noise off, and compare how far each release
  moves with the sensitivity its noise was calibrated for (std used ÷ the ledger's σ);
- a statistical lower bound on ε (`trials`, `statistics`): many trials of the release on both
  neighbours, a threshold test, Clopper–Pearson intervals; a bound above the ledger's ε is a bug.

The names below load on first use (PEP 562): `statistics` imports scipy.stats (0.8–1.4 s on a
2-core machine), and every run's projection imports this package to ask whether its algorithm is
audited (`dpfl.projection.auditable`), which needs none of it (issue 43).
"""

from __future__ import annotations

import importlib

__all__ = ["EpsilonBound", "clopper_pearson", "epsilon_lower_bound", "projected_trials"]

_HOME = {
    "EpsilonBound": "dpfl.audit.statistics",
    "clopper_pearson": "dpfl.audit.statistics",
    "epsilon_lower_bound": "dpfl.audit.statistics",
    "projected_trials": "dpfl.audit.trials",
}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'dpfl.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""The audit of one run spec's first round: fuzzing, then a statistical ε lower bound per release.

For every ledger party that released in round 1, the worst neighbours the fuzzer found (largest
gap ÷ claimed sensitivity) become the canary pair of the statistical audit: N trials of the
release on each side, drawn exactly along the canary direction (`trials`), bounded by
Clopper–Pearson (`statistics`). The bound is compared with the ledger's ε of that one release
(the party's round-1 event, by the spec's accountant and δ). Sampling is fixed for the audit
(every rate 1, `fuzz.fixed_sample_spec`), so both numbers are of the release given its sample;
what sub-sampling amplifies is the accountant's to prove, not something these trials can test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpfl.audit.fuzz import COVERAGE, NOT_COVERED, ReleaseGap, fixed_sample_spec, fuzz
from dpfl.audit.local import LOCAL_COVERAGE, local_randomizer_audit
from dpfl.audit.statistics import epsilon_lower_bound
from dpfl.audit.trials import projected_trials
from dpfl.errors import SpecError
from dpfl.privacy.calibration import epsilon
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL
from dpfl.runner import prepare, project
from dpfl.spec import RunSpec

__all__ = ["ReleaseAudit", "audit_first_round", "audit_json"]


@dataclass(frozen=True)
class ReleaseAudit:
    """The audit of one party's round-1 release."""

    release: str
    neighbours: str
    max_sensitivity_ratio: float | None  # None for a local randomizer (its ε₀ is tested directly)
    claimed_sensitivity: float
    noise_std: float | None  # None for a local randomizer (no additive noise)
    noise_multiplier: float
    epsilon_lower: float
    epsilon_ledger: float
    trials: int

    @property
    def sound(self) -> bool:
        """Returns whether nothing contradicts the ledger: ratio ≤ 1 and lower bound ≤ ledger ε."""
        ratio_ok = self.max_sensitivity_ratio is None or self.max_sensitivity_ratio <= 1 + 1e-6
        return ratio_ok and self.epsilon_lower <= self.epsilon_ledger

    def to_json(self) -> dict[str, Any]:
        """Returns the audit as a JSON-ready dict."""
        return {
            "release": self.release,
            "neighbours": self.neighbours,
            "epsilon_lower": self.epsilon_lower,
            "epsilon_ledger": self.epsilon_ledger,
            "max_sensitivity_ratio": self.max_sensitivity_ratio,
            "claimed_sensitivity": self.claimed_sensitivity,
            "noise_std": self.noise_std,
            "noise_multiplier": self.noise_multiplier,
            "trials": self.trials,
            "sound": self.sound,
        }


def audit_first_round(
    spec: RunSpec, *, data_dirs: Sequence[Path] = (), trials: int = 1_000_000, seed: int = 0
) -> list[ReleaseAudit]:
    """Returns the audit of every party's round-1 release of `spec`, worst ratio first.

    Args:
        trials: trials per side of the statistical audit (half choose the test, half bound it).
        seed: seeds the trials' noise.

    Raises:
        SpecError: the algorithm is not private or has no audit coverage yet.
    """
    if spec.algorithm in LOCAL_COVERAGE:
        algorithm = prepare(spec, data_dirs=data_dirs)
        sigma = project(algorithm).noise_multiplier
        sigma = np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma
        found = local_randomizer_audit(algorithm, sigma, trials=trials, seed=seed)
        return [ReleaseAudit(**found, noise_std=None)]
    if spec.algorithm not in COVERAGE:
        why = NOT_COVERED.get(spec.algorithm, "it is not private")
        raise SpecError(
            "algorithm",
            f"{spec.algorithm!r} has no audit coverage yet ({why}); covered: {', '.join(sorted(COVERAGE))}.",
        )
    if trials < 8:
        raise SpecError("trials", f"must be ≥ 8 (half choose the test, half bound it); got {trials}.")
    algorithm = prepare(spec, data_dirs=data_dirs)
    privacy = project(algorithm)  # the σ the run itself would use (calibrated on its own plan)
    sigma = privacy.noise_multiplier
    sigma = np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma
    fixed = type(algorithm)(fixed_sample_spec(spec, algorithm.data), algorithm.data, algorithm.model)
    worst: dict[str, ReleaseGap] = {}
    for gap in fuzz(fixed, sigma):
        if gap.party not in worst or gap.ratio > worst[gap.party].ratio:
            worst[gap.party] = gap
    out = []
    for i, (party, gap) in enumerate(sorted(worst.items())):
        on_d, on_d_prime = projected_trials(
            gap.value_d, gap.value_d_prime, noise_std=gap.noise_std, trials=trials, seed=seed + i
        )
        bound = epsilon_lower_bound(on_d, on_d_prime, delta=privacy.delta)
        ledger = epsilon(gap.event, delta=privacy.delta, accountant=privacy.accountant)
        out.append(
            ReleaseAudit(
                release=party,
                neighbours=gap.neighbours,
                max_sensitivity_ratio=gap.ratio,
                claimed_sensitivity=gap.claimed_sensitivity,
                noise_std=gap.noise_std,
                noise_multiplier=gap.noise_multiplier,
                epsilon_lower=bound.epsilon,
                epsilon_ledger=float(ledger),
                trials=trials,
            )
        )
    return sorted(out, key=lambda a: -(a.max_sensitivity_ratio or 0.0))


def audit_json(audits: Sequence[ReleaseAudit]) -> dict[str, Any]:
    """Returns the audit as served: its releases, labelled not private (an audit measures the
    releases on the private data without noise, which no ledger covers)."""
    return {"label": DIAGNOSTICS_LABEL, "releases": [a.to_json() for a in audits]}

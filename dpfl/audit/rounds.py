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

from dpfl.audit.blackbox import BlackBoxAudit, black_box
from dpfl.audit.fuzz import TOLERANCE, ReleaseGap, check_auditable, coverage_of, fixed_sample_spec, fuzz
from dpfl.audit.local import LOCAL_COVERAGE, local_randomizer_audit
from dpfl.audit.statistics import epsilon_lower_bound
from dpfl.audit.trials import projected_trials
from dpfl.errors import SpecError
from dpfl.privacy.calibration import epsilon
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL
from dpfl.runner import prepare, project
from dpfl.spec import RunSpec

__all__ = [
    "INCONCLUSIVE",
    "NO_VIOLATION",
    "VIOLATION",
    "ReleaseAudit",
    "audit_black_box",
    "audit_first_round",
    "audit_json",
    "check_auditable",
]


PROOF_CONFIDENCE = 0.99
"""The family-wise confidence of a proven violation. A tight mechanism's lower bound lands above its
ε one time in 1/(1 − confidence) (sdp_mbsgd's randomizer is exactly tight): at 95 % that is a
false alarm on a correct algorithm in one audit of twenty, at 99 % in one of a hundred."""

SINGLE_CONFIDENCE = 0.95
"""The confidence of each single test: one above the ledger's ε at it alone is "inconclusive"."""

VIOLATION = "violation"
INCONCLUSIVE = "inconclusive"
NO_VIOLATION = "no violation found"


@dataclass(frozen=True)
class ReleaseAudit:
    """The audit of one party's round-1 release, over one or more seeds of trials.

    `epsilon_lower` is the largest lower bound over the seeds at the family-wise confidence
    (`confidence` for all releases and seeds together, Bonferroni); `epsilon_lower_each` the
    largest of the single tests at `SINGLE_CONFIDENCE` (95 %) each, which one seed in twenty of a tight
    mechanism puts above its ε by chance.
    """

    release: str
    neighbours: str
    max_sensitivity_ratio: float | None  # None for a local randomizer (its ε₀ is tested directly)
    claimed_sensitivity: float
    noise_std: float | None  # None for a local randomizer (no additive noise)
    noise_multiplier: float
    epsilon_lower: float
    epsilon_ledger: float
    trials: int
    epsilon_lower_each: float = 0.0
    seeds: int = 1
    confidence: float = PROOF_CONFIDENCE

    @property
    def verdict(self) -> str:
        """Returns "violation" (proven: a ratio above 1 + TOLERANCE, or a family-wise lower bound
        above the ledger's ε), "inconclusive" (only a single test's bound is above it) or "no
        violation found" (a lower bound proves nothing about soundness)."""
        if (self.max_sensitivity_ratio or 0.0) > 1 + TOLERANCE or self.epsilon_lower > self.epsilon_ledger:
            return VIOLATION
        if self.epsilon_lower_each > self.epsilon_ledger:
            return INCONCLUSIVE
        return NO_VIOLATION

    @property
    def sound(self) -> bool:
        """Returns whether no violation is proven."""
        return self.verdict != VIOLATION

    def to_json(self) -> dict[str, Any]:
        """Returns the audit as a JSON-ready dict."""
        return {
            "release": self.release,
            "neighbours": self.neighbours,
            "epsilon_lower": self.epsilon_lower,
            "epsilon_lower_each": self.epsilon_lower_each,
            "epsilon_ledger": self.epsilon_ledger,
            "max_sensitivity_ratio": self.max_sensitivity_ratio,
            "claimed_sensitivity": self.claimed_sensitivity,
            "noise_std": self.noise_std,
            "noise_multiplier": self.noise_multiplier,
            "trials": self.trials,
            "seeds": self.seeds,
            "confidence": self.confidence,
            "verdict": self.verdict,
            "sound": self.sound,
        }


def audit_first_round(
    spec: RunSpec,
    *,
    data_dirs: Sequence[Path] = (),
    trials: int = 1_000_000,
    seed: int = 0,
    seeds: int = 1,
    confidence: float = PROOF_CONFIDENCE,
) -> list[ReleaseAudit]:
    """Returns the audit of every party's round-1 release of `spec`, worst ratio first.

    Args:
        trials: trials per side and seed of the statistical audit (half choose the test, half
            bound it).
        seed: the first seed of the trials' noise; `seeds` consecutive ones are run.
        confidence: family-wise, over every release and seed (each test at 1 − (1 − confidence)/m).

    Raises:
        SpecError: the algorithm is not private, or not auditable yet (no coverage).
    """
    if trials < 8:
        raise SpecError("trials", f"must be ≥ 8 (half choose the test, half bound it); got {trials}.")
    if seeds < 1:
        raise SpecError("seeds", f"must be ≥ 1; got {seeds}.")
    check_auditable(spec.algorithm)
    algorithm = prepare(spec, data_dirs=data_dirs)
    privacy = project(algorithm)  # the σ the run itself would use (calibrated on its own plan)
    sigma = privacy.noise_multiplier
    sigma = np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma
    keys = range(seed, seed + seeds)
    if spec.algorithm in LOCAL_COVERAGE:
        found = [local_randomizer_audit(algorithm, sigma, trials=trials, seed=k) for k in keys]
        meta = {k: v for k, v in found[0].items() if k not in ("statistics", "delta")}
        bounds = _bounds([f["statistics"] for f in found], delta=0.0, confidence=confidence, tests=seeds)
        return [
            ReleaseAudit(**meta, noise_std=None, trials=trials, seeds=seeds, confidence=confidence, **bounds)
        ]
    fixed = type(algorithm)(fixed_sample_spec(spec, algorithm.data), algorithm.data, algorithm.model)
    worst: dict[str, ReleaseGap] = {}
    for gap in fuzz(fixed, sigma):
        if gap.party not in worst or gap.ratio > worst[gap.party].ratio:
            worst[gap.party] = gap
    out = []
    for i, (party, gap) in enumerate(sorted(worst.items())):
        samples = [
            projected_trials(
                gap.value_d, gap.value_d_prime, noise_std=gap.noise_std, trials=trials, seed=k * 1_000_003 + i
            )
            for k in keys
        ]
        bounds = _bounds(samples, delta=privacy.delta, confidence=confidence, tests=seeds * len(worst))
        ledger = epsilon(gap.event, delta=privacy.delta, accountant=privacy.accountant)
        out.append(
            ReleaseAudit(
                release=party,
                neighbours=gap.neighbours,
                max_sensitivity_ratio=gap.ratio,
                claimed_sensitivity=gap.claimed_sensitivity,
                noise_std=gap.noise_std,
                noise_multiplier=gap.noise_multiplier,
                epsilon_ledger=float(ledger),
                trials=trials,
                seeds=seeds,
                confidence=confidence,
                **bounds,
            )
        )
    return sorted(out, key=lambda a: -(a.max_sensitivity_ratio or 0.0))


def audit_black_box(
    spec: RunSpec,
    *,
    data_dirs: Sequence[Path] = (),
    trials: int = 1_000,
    rounds: int = 2,
    seed: int = 0,
    seeds: int = 1,
    confidence: float = PROOF_CONFIDENCE,
) -> BlackBoxAudit | None:
    """Returns the black-box audit of `spec`'s first `rounds` rounds (`dpfl.audit.blackbox`), or
    None where it does not apply: a local randomizer (its ε₀ is tested directly) and the voting
    family (its releases are labels, not a model's moves).

    The pair is the coverage's `black_box` one, else the fuzzer's worst; the party is the one
    whose data the pair changes (the round's only party, or the changed silo's).

    Raises:
        SpecError: as `audit_first_round`.
    """
    check_auditable(spec.algorithm)
    coverage = coverage_of(spec.algorithm) if spec.algorithm not in LOCAL_COVERAGE else None
    if coverage is None or coverage.per_query:
        return None
    algorithm = prepare(spec, data_dirs=data_dirs)
    privacy = project(algorithm)
    sigma = privacy.noise_multiplier
    sigma = np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma
    if coverage.black_box is not None:
        pair = coverage.black_box(algorithm.data)
    else:
        fixed = type(algorithm)(fixed_sample_spec(spec, algorithm.data), algorithm.data, algorithm.model)
        worst = max(fuzz(fixed, sigma), key=lambda gap: gap.ratio)
        pair = next(p for p in coverage.pairs(algorithm) if worst.neighbours.startswith(p.name))
    return black_box(
        algorithm,
        sigma,
        pair,
        delta=privacy.delta,
        accountant=privacy.accountant,
        rounds=rounds,
        trials=trials,
        seed=seed,
        seeds=seeds,
        confidence=confidence,
    )


def _bounds(
    samples: Sequence[tuple[np.ndarray, np.ndarray]], *, delta: float, confidence: float, tests: int
) -> dict[str, float]:
    """Returns the largest lower bound over `samples` at the family-wise `confidence` over `tests`
    tests (Bonferroni) and the largest at `SINGLE_CONFIDENCE` each."""
    family = 1 - (1 - confidence) / tests
    return {
        "epsilon_lower": max(
            epsilon_lower_bound(a, b, delta=delta, confidence=family).epsilon for a, b in samples
        ),
        "epsilon_lower_each": max(
            epsilon_lower_bound(a, b, delta=delta, confidence=SINGLE_CONFIDENCE).epsilon for a, b in samples
        ),
    }


def audit_json(audits: Sequence[ReleaseAudit], black: BlackBoxAudit | None = None) -> dict[str, Any]:
    """Returns the audit as served: its releases (and the black-box trials' verdict), labelled
    not private (an audit measures the releases on the private data without noise, which no
    ledger covers)."""
    out = {"label": DIAGNOSTICS_LABEL, "releases": [a.to_json() for a in audits]}
    return out | ({} if black is None else {"black_box": black.to_json()})

"""Trials of one Gaussian release, reduced to the statistic the audit tests.

A release is M(D) = v_D + Z with Z ~ N(0, s²I) isotropic (s: the noise std the code actually
used, as the release tap recorded it). The most powerful test between M(D) and M(D′) is a
threshold on the projection onto the canary direction u = (v_D − v_D′)/‖v_D − v_D′‖
(Neyman–Pearson: the log-likelihood ratio is linear in ⟨x, u⟩). That projection is exactly

    ⟨M(D), u⟩ ~ N(⟨v_D, u⟩, s²),    ⟨M(D′), u⟩ ~ N(⟨v_D′, u⟩, s²),

because ⟨Z, u⟩ ~ N(0, s²) for a unit u. So N trials of a release of any dimension are N
draws of a 1-D Gaussian: exact, not an approximation, and a million trials take milliseconds.
Only the means come from running the algorithm (with the tap's noise off); the statistic's
spread is the recorded std, so a release whose code adds less noise than its ledger claims
is caught by the audit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["projected_trials"]


def projected_trials(
    value_d: np.ndarray, value_d_prime: np.ndarray, *, noise_std: float, trials: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Returns `trials` draws of ⟨M(D), u⟩ and of ⟨M(D′), u⟩, float64 [trials] each.

    Args:
        value_d, value_d_prime: the release's values before noise on D and D′ (any shape).
        noise_std: the isotropic noise std s of the release.
        seed: seeds the draws (the audit is reproducible).
    """
    a = np.asarray(value_d, dtype=np.float64).ravel()
    b = np.asarray(value_d_prime, dtype=np.float64).ravel()
    gap = float(np.linalg.norm(a - b))
    rng = np.random.default_rng(seed)
    if gap == 0.0:  # identical releases: any direction, both sides the same distribution
        return rng.normal(0.0, noise_std, trials), rng.normal(0.0, noise_std, trials)
    u = (a - b) / gap
    return rng.normal(float(a @ u), noise_std, trials), rng.normal(float(b @ u), noise_std, trials)

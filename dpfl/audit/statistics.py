"""A 95 % lower bound on ε from trials of a mechanism on two neighbouring datasets.

If a mechanism M is (ε, δ)-DP, then for neighbours D, D′ and every set S of outputs

    P[M(D) ∈ S] ≤ e^ε · P[M(D′) ∈ S] + δ        (and with D, D′ swapped),

so any test that says "D" on S, with true-positive rate TPR = P[M(D) ∈ S] and false-positive
rate FPR = P[M(D′) ∈ S], certifies ε ≥ log((TPR − δ) / FPR). An auditor runs the mechanism
N times on each side, reduces every output to a scalar test statistic, and takes S to be a
threshold set {statistic ≥ t}. The observed rates are estimates; a lower bound that holds
with probability 1 − α replaces TPR by a one-sided Clopper–Pearson lower bound and FPR by an
upper bound, each at level α/2 (a union bound gives the joint 1 − α):

    ε_lo = log((TPR_lo − δ) / FPR_hi).

A value of ε_lo above the ledger's ε proves, at that confidence, that the release leaks more
than it claims: a bug. A value below proves nothing about soundness (it is a lower bound); its
distance to the ledger's ε says how tight the audit is.

Choosing the threshold on the same trials that bound it would make the 95 % optimistic, so the
trials are split: the first part picks the test (threshold, direction, which side is the
positive one) by the same criterion, the second part alone bounds it (Jagielski, Ullman & Oprea
2020, "Auditing differentially private machine learning: how private is private SGD?", §3 and
Alg. 2; Nasr, Song, Thakurta, Papernot & Carlini 2021, "Adversary instantiation: lower bounds
for differentially private machine learning", §4). Clopper & Pearson 1934 for the intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["EpsilonBound", "clopper_pearson", "epsilon_lower_bound"]

_CANDIDATES = 400  # thresholds tried per direction: a geometric grid of false-positive counts


@dataclass(frozen=True)
class EpsilonBound:
    """A lower bound on ε and the test that gave it.

    Attributes:
        epsilon: the (1 − α) lower bound on ε, ≥ 0 (0 when no test beats δ).
        threshold: t of the chosen test {sign·statistic ≥ t}.
        sign: +1 or −1, the direction of the test.
        positive: "D" or "D′": the side the test claims when the statistic passes t.
        tpr, fpr: the rates observed on the evaluation trials.
        tpr_low, fpr_high: their Clopper–Pearson bounds at level α/2 each.
        trials: evaluation trials per side (the rest chose the test).
    """

    epsilon: float
    threshold: float
    sign: int
    positive: str
    tpr: float
    fpr: float
    tpr_low: float
    fpr_high: float
    trials: int


def clopper_pearson(successes: np.ndarray, trials: int, *, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Returns one-sided (lower, upper) Clopper–Pearson bounds on a binomial rate, each at level α.

    lower = Beta⁻¹(α; k, n − k + 1) (0 when k = 0), upper = Beta⁻¹(1 − α; k + 1, n − k) (1 when
    k = n): each holds with probability ≥ 1 − α (Clopper & Pearson 1934).
    """
    k = np.asarray(successes, dtype=float)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha, k, trials - k + 1), 0.0)
        upper = np.where(k < trials, stats.beta.ppf(1 - alpha, k + 1, trials - k), 1.0)
    return lower, upper


def epsilon_lower_bound(
    statistic_d: np.ndarray,
    statistic_d_prime: np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
) -> EpsilonBound:
    """Returns a `confidence` lower bound on ε from scalar statistics of trials on D and on D′.

    Every threshold test {sign·x ≥ t} with either side as the positive one is a candidate; the
    first `selection_fraction` of each sample picks the one with the largest bound, the rest
    bounds it (see the module docstring).

    Args:
        statistic_d, statistic_d_prime: the statistic of N independent trials on each side.
        delta: the δ of the (ε, δ) claim under audit.
        confidence: 1 − α of the bound.
        selection_fraction: share of the trials spent choosing the test, in (0, 1).
    """
    d, dp = np.asarray(statistic_d, dtype=float).ravel(), np.asarray(statistic_d_prime, dtype=float).ravel()
    if not (0 < selection_fraction < 1) or min(len(d), len(dp)) < 4:
        raise ValueError(
            f"need ≥ 4 trials per side and selection_fraction in (0, 1); got {len(d)}, {len(dp)} "
            f"trials and {selection_fraction}"
        )
    alpha = (1 - confidence) / 2  # the union bound over TPR and FPR
    cut_d, cut_dp = int(len(d) * selection_fraction), int(len(dp) * selection_fraction)
    choose = {"D": d[:cut_d], "D′": dp[:cut_dp]}
    bound = {"D": d[cut_d:], "D′": dp[cut_dp:]}
    best: tuple[float, float, int, str] = (-math.inf, math.inf, 1, "D")
    for positive, negative in (("D", "D′"), ("D′", "D")):
        for sign in (1, -1):
            eps, t = _best_threshold(
                sign * choose[positive], sign * choose[negative], delta=delta, alpha=alpha
            )
            if eps > best[0]:
                best = (eps, t, sign, positive)
    _, t, sign, positive = best
    negative = "D′" if positive == "D" else "D"
    pos, neg = sign * bound[positive], sign * bound[negative]
    tp, fp = int(np.count_nonzero(pos >= t)), int(np.count_nonzero(neg >= t))
    tpr_low, _ = clopper_pearson(np.array([tp]), len(pos), alpha=alpha)
    _, fpr_high = clopper_pearson(np.array([fp]), len(neg), alpha=alpha)
    eps = _epsilon(tpr_low, fpr_high, delta)[0]
    return EpsilonBound(
        epsilon=float(max(eps, 0.0)),
        threshold=float(t),
        sign=sign,
        positive=positive,
        tpr=tp / len(pos),
        fpr=fp / len(neg),
        tpr_low=float(tpr_low[0]),
        fpr_high=float(fpr_high[0]),
        trials=min(len(pos), len(neg)),
    )


def _epsilon(tpr_low: np.ndarray, fpr_high: np.ndarray, delta: float) -> np.ndarray:
    """Returns log((TPR_lo − δ)/FPR_hi), −∞ where TPR_lo ≤ δ."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.clip(tpr_low - delta, 0, None) / fpr_high)
    return np.where(tpr_low > delta, out, -np.inf)


def _best_threshold(
    positive: np.ndarray, negative: np.ndarray, *, delta: float, alpha: float
) -> tuple[float, float]:
    """Returns (bound, t) of the best test {x ≥ t} over a grid of thresholds, all at once.

    The thresholds sit just above the negatives' k-th largest values for k on a geometric grid
    from 0 (above every negative) to all of them, where the ratio TPR/FPR changes fastest: a
    good test has few false positives.
    """
    neg = np.sort(negative)[::-1]
    pos = np.sort(positive)
    n_neg, n_pos = len(neg), len(pos)
    ranks = np.unique(np.concatenate([[0], np.geomspace(1, n_neg, _CANDIDATES).astype(int)]))
    ranks = ranks[ranks < n_neg]
    # t just above neg[k]: exactly k negatives (and the ties above) pass.
    thresholds = np.nextafter(neg[ranks], np.inf)
    fp = np.searchsorted(-neg, -thresholds, side="right")  # negatives ≥ t (neg is descending)
    tp = n_pos - np.searchsorted(pos, thresholds, side="left")
    tpr_low, _ = clopper_pearson(tp, n_pos, alpha=alpha)
    _, fpr_high = clopper_pearson(fp, n_neg, alpha=alpha)
    eps = _epsilon(tpr_low, fpr_high, delta)
    i = int(np.argmax(eps))
    return float(eps[i]), float(thresholds[i])

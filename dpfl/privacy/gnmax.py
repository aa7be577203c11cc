"""RDP analysis of a noisy-argmax vote (the GNMax aggregator of PATE).

The mechanism releases ``argmax_j (v_j + Z_j)`` with ``Z_j ~ N(0, noise_std^2)`` i.i.d., where ``v`` is
the summed vote histogram over ``C`` classes and ``sensitivity`` is the L2 sensitivity of ``v``. This is
the aggregator of AE-DPFL and kNN-DPFL (Zhu et al. 2021, "Voting-based Approaches for Differentially
Private Federated Learning", arXiv 2010.04851, Theorem 5) and of PATE's GNMax (Papernot et al. 2018,
"Scalable Private Learning with PATE", ICLR 2018).

Sensitivities used by the voting paper (reference notes ``003_voting_dpfl.md`` §3.2): 1 for agent-level
AE-DPFL and kNN-DPFL, sqrt(2) for instance-level AE-DPFL (PATE's setting), sqrt(2/k) for instance-level
kNN-DPFL as printed in the paper.

The data-dependent bound is PATE 2018 Theorem 6 with q from Proposition 7, generalised from PATE's
``eps(l) = l / sigma^2`` (sensitivity sqrt(2)) to any sensitivity. The voting paper's Theorem 7 closed
form is deliberately NOT implemented: its constants and exponents are wrong (notes §3.4).

Caveat: a data-dependent epsilon depends on the private votes; publishing it is itself a leak unless
sanitised (e.g. PATE's smooth-sensitivity release), which this module does not do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import log_ndtr, logsumexp

__all__ = [
    "gnmax_log_q",
    "gnmax_rdp",
    "gnmax_rdp_data_independent",
    "gnmax_rdp_from_log_q",
    "vote_sensitivity",
]


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number > 0; got {value!r}.")
    # `not value > 0` also rejects NaN, which every comparison answers False.
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"`{name}` must be > 0 and finite; got {value!r}.")
    return float(value)


def _check_orders(orders: np.ndarray) -> np.ndarray:
    arr = np.asarray(orders, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`orders` must be a non-empty 1-D array; got shape {arr.shape}.")
    # RDP of order 1 is the KL divergence, which Theorem 6 and the conversion below do not cover.
    if not np.all(np.isfinite(arr)) or np.any(arr <= 1):
        raise ValueError(
            f"`orders` must all be finite and > 1; got min {float(np.min(arr))}, max {float(np.max(arr))}."
        )
    return arr


def _check_counts(counts: Sequence[float]) -> np.ndarray:
    arr = np.asarray(counts, dtype=float)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(f"`counts` must be a 1-D histogram with at least 2 classes; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`counts` must all be finite; got {arr.tolist()!r}.")
    return arr


def gnmax_log_q(counts: Sequence[float], *, noise_std: float) -> float:
    """Upper bound on ``log Pr[argmax_j (v_j + Z_j) != i*]``, with ``i* = argmax_j v_j``.

    For each ``j != i*``, ``Z_j - Z_i*`` is ``N(0, 2 sigma^2)``, so ``Pr[v_j + Z_j >= v_i* + Z_i*]``
    ``= Phi(-(v_i* - v_j) / (sqrt(2) sigma)) = erfc((v_i* - v_j) / (2 sigma)) / 2``.
    A union bound over ``j`` gives PATE 2018 Proposition 7:
    ``q <= sum_{j != i*} erfc((v_i* - v_j) / (2 sigma)) / 2``. This is a property of the noise alone, so
    it holds for any sensitivity. As in PATE's reference code (tensorflow/privacy
    ``research/pate_2018/core.py``, ``compute_logq_gaussian``), the bound is capped at ``(C-1)/C``: the
    class with the largest count is the most likely output, so it wins with probability at least 1/C.

    Args:
        counts: Noiseless vote histogram ``v`` (length ``C >= 2``; any finite reals).
        noise_std: Standard deviation ``sigma`` of the Gaussian noise on each count.

    Returns:
        The natural log of the bound ``q~`` (``-inf`` only if every term underflows).

    Raises:
        ValueError: If ``counts`` is not a finite 1-D histogram with >= 2 classes or ``noise_std <= 0``.
        TypeError: If ``noise_std`` is not a real number.
    """
    v = _check_counts(counts)
    sigma = _check_positive("noise_std", noise_std)
    top = int(np.argmax(v))
    gaps = v[top] - np.delete(v, top)
    # log_ndtr keeps full relative precision deep in the tail, where erfc would underflow to 0.
    log_q = float(logsumexp(log_ndtr(-gaps / (math.sqrt(2.0) * sigma))))
    return min(log_q, math.log1p(-1.0 / v.size))


def gnmax_rdp_data_independent(orders: np.ndarray, *, noise_std: float, sensitivity: float) -> np.ndarray:
    """Data-independent RDP of one noisy-argmax query: ``eps(a) = a * s^2 / (2 sigma^2)``.

    The Gaussian mechanism with L2 sensitivity ``s`` and noise ``sigma`` has this RDP curve (Mironov 2017,
    Corollary 3); the argmax is post-processing. This is the voting paper's Theorem 5 for one query and
    PATE 2018 Proposition 8 when ``s = sqrt(2)``.

    Args:
        orders: Renyi orders, each > 1.
        noise_std: Standard deviation ``sigma`` of the noise on each count.
        sensitivity: L2 sensitivity ``s`` of the summed vote histogram.

    Returns:
        Array of RDP values, one per order.

    Raises:
        ValueError: If an order is <= 1 or not finite, or ``noise_std`` / ``sensitivity`` is not > 0.
        TypeError: If ``noise_std`` or ``sensitivity`` is not a real number.
    """
    alphas = _check_orders(orders)
    sigma = _check_positive("noise_std", noise_std)
    s = _check_positive("sensitivity", sensitivity)
    return alphas * s**2 / (2.0 * sigma**2)


def gnmax_rdp_from_log_q(
    orders: np.ndarray, *, log_q: float, noise_std: float, sensitivity: float
) -> np.ndarray:
    """Data-dependent RDP of one query given ``log q~ >= log Pr[M(D) != i*]`` (PATE 2018 Theorem 6).

    Theorem 6: if M is ``(mu1, eps1)``- and ``(mu2, eps2)``-RDP, ``l <= mu1`` and
    ``q~ <= e^{(mu2-1) eps2} / (mu1/(mu1-1) * mu2/(mu2-1))^{mu2}``, then for every neighbour D'
    ``D_l(M(D) || M(D')) <= log((1-q~) A^{l-1} + q~ B^{l-1}) / (l-1)`` with
    ``A = (1-q~) / (1 - (q~ e^{eps2})^{(mu2-1)/mu2})`` and ``B = e^{eps1} / q~^{1/(mu1-1)}``.
    The theorem accepts any upper bound ``q~`` on the true ``q`` that meets this condition (PATE's
    reference code cites its appendix Lemma 9 for it). We also require ``mu2 > 1`` and ``q~ e^{eps2} < 1``
    so that ``A`` is finite and positive, as that code does.

    Here ``eps(l) = l / sigma_eff^2`` with ``sigma_eff = sqrt(2) sigma / s``; PATE's GNMax is the case
    ``s = sqrt(2)``, ``sigma_eff = sigma``. Following PATE Proposition 10 (made for ``l / sigma^2``) we take
    ``mu2 = sigma_eff sqrt(log(1/q~))`` and ``mu1 = mu2 + 1``; any choice is valid, this one is near-optimal.
    Where the conditions fail the data-independent value is returned, so the result never exceeds it.

    Args:
        orders: Renyi orders ``l``, each > 1.
        log_q: Natural log of ``q~``, at most 0 (e.g. from `gnmax_log_q`).
        noise_std: Standard deviation ``sigma`` of the noise on each count.
        sensitivity: L2 sensitivity ``s`` of the summed vote histogram.

    Returns:
        Array of ``min(data-independent, data-dependent)`` RDP values, each >= 0, one per order.

    Raises:
        ValueError: If ``log_q`` is NaN or > 0, or another argument is invalid.
        TypeError: If ``log_q``, ``noise_std`` or ``sensitivity`` is not a real number.
    """
    indep = gnmax_rdp_data_independent(orders, noise_std=noise_std, sensitivity=sensitivity)
    alphas = np.asarray(orders, dtype=float)
    if isinstance(log_q, bool) or not isinstance(log_q, (int, float, np.integer, np.floating)):
        raise TypeError(f"`log_q` must be a real number <= 0; got {log_q!r}.")
    if not log_q <= 0:
        raise ValueError(f"`log_q` must be <= 0 (a log-probability); got {log_q!r}.")
    log_q = float(log_q)
    if log_q == -math.inf:
        # The output is deterministic, so the divergence is 0 (also the limit of Theorem 6 as q -> 0).
        return np.zeros_like(indep)
    sigma_eff = math.sqrt(2.0) * float(noise_std) / float(sensitivity)
    mu2 = sigma_eff * math.sqrt(-log_q)
    mu1 = mu2 + 1.0
    if mu2 <= 1.0:
        return indep
    eps1, eps2 = mu1 / sigma_eff**2, mu2 / sigma_eff**2
    log_q_max = (mu2 - 1.0) * eps2 - mu2 * (math.log(mu1 / (mu1 - 1.0)) + math.log(mu2 / (mu2 - 1.0)))
    if log_q > log_q_max or log_q + eps2 >= 0.0:
        return indep
    log_1mq = _log1mexp(log_q)
    log_a = log_1mq - _log1mexp((log_q + eps2) * (mu2 - 1.0) / mu2)
    log_b = eps1 - log_q / (mu1 - 1.0)
    # Log space throughout: A^{l-1} and B^{l-1} overflow for large orders long before the bound does.
    dep = np.logaddexp(log_1mq + (alphas - 1.0) * log_a, log_q + (alphas - 1.0) * log_b) / (alphas - 1.0)
    # A divergence is >= 0, so clipping only loosens the bound; it removes rounding below zero.
    dep = np.maximum(dep, 0.0)
    applies = alphas < mu1  # PATE states l <= mu1; the strict form matches its code and is safe.
    return np.where(applies, np.minimum(indep, dep), indep)


def gnmax_rdp(
    orders: np.ndarray, counts: Sequence[float], *, noise_std: float, sensitivity: float
) -> np.ndarray:
    """Per-order RDP of one noisy-argmax query on histogram ``counts``, data-dependent where possible.

    Combines `gnmax_log_q` (PATE 2018 Proposition 7) with `gnmax_rdp_from_log_q` (Theorem 6); at each
    order the result is ``min(data-independent, data-dependent)`` and never negative. Summing the result
    over queries gives the data-dependent RDP of the whole run (voting paper §3.4, PATE §3).

    Args:
        orders: Renyi orders, each > 1.
        counts: Noiseless vote histogram ``v`` of this query (length >= 2).
        noise_std: Standard deviation ``sigma`` of the noise on each count.
        sensitivity: L2 sensitivity ``s`` of the summed vote histogram.

    Returns:
        Array of RDP values, one per order.

    Raises:
        ValueError: If any argument is invalid.
        TypeError: If ``noise_std`` or ``sensitivity`` is not a real number.
    """
    log_q = gnmax_log_q(counts, noise_std=noise_std)
    return gnmax_rdp_from_log_q(orders, log_q=log_q, noise_std=noise_std, sensitivity=sensitivity)


def _log1mexp(x: float) -> float:
    """``log(1 - e^x)`` for ``x < 0``, accurate at both ends (Maechler 2012's switch at -log 2)."""
    return math.log(-math.expm1(x)) if x > -math.log(2.0) else math.log1p(-math.exp(x))


def vote_sensitivity(method: str, level: str, *, k: int | None = None) -> float:
    """Returns the L2 sensitivity of the summed vote histogram (reference §3.2).

    - Agent level (one agent's whole vote added or removed): 1 for a one-hot vote and for a
      kNN frequency vector (on the simplex, so its L2 norm is at most 1).
    - Instance level, AE-DPFL: one record can flip an agent's predicted label, e_a → e_b: √2.
    - Instance level, kNN-DPFL: adding or removing one record changes at most one of the
      agent's k neighbours, (e_new − e_old)/k: √2/k. The paper prints √(2/k) (Theorem 5,
      Δ² = 2/k), a slip the note explains (§3.2); with k fixed, √2/k is exact.
    """
    if level == "agent":
        return 1.0
    if method == "ae":
        return math.sqrt(2.0)
    if k is None:
        raise ValueError("instance-level kNN sensitivity needs k")
    return math.sqrt(2.0) / k

"""Privacy amplification by shuffling, numerically, from Feldman, McMillan & Talwar's "clones" reduction.

"Hiding Among the Clones" (FOCS 2021, arXiv 2012.12803), Theorem 3.2: if n users each apply an ε0-DP local
randomizer and the outputs are shuffled, the outputs on neighbouring datasets are one post-processing of
P = (A + Δ, C − A + 1 − Δ) and Q = (A + 1 − Δ, C − A + Δ), with C ~ Bin(n − 1, e^{−ε0}), A ~ Bin(C, 1/2),
Δ ~ Bernoulli(q), q = e^{ε0} / (e^{ε0} + 1). So any divergence with data processing (hockey-stick, Rényi)
of (P, Q) bounds the shuffled mechanism; swapping the coordinates maps P to Q, so D(P‖Q) = D(Q‖P).

Facts used (B_N: the Bin(N, 1/2) pmf, q̄ = 1 − q): (1) an outcome (x, y) fixes c = x + y − 1, so (P, Q)
mixes pairs (P_c, Q_c) on x ∈ {0, …, N} by Bin(c; n − 1, e^{−ε0}); with N = c + 1, u = x/N,
P_c(x) = q B_c(x − 1) + q̄ B_c(x) = 2B_N(x)(qu + q̄(1 − u)), Q_c(x) = 2B_N(x)(q̄u + q(1 − u)); (2) P_c/Q_c
rises with x from e^{−ε0} to e^{ε0}: P ≤ e^{ε0} Q; (3) (P_{c+1}, Q_{c+1}) is (P_c, Q_c) plus a coin on x.
"""

import math
from collections.abc import Callable

import numpy as np
from scipy.special import expit, log_expit, logsumexp, rel_entr

__all__ = [
    "shuffle_closed_form_epsilon",
    "shuffle_delta",
    "shuffle_epsilon",
    "shuffle_log_pmfs",
    "shuffle_rdp",
]

_DELTA_TAIL = 1e-18  # mass of C dropped from each side by shuffle_delta; added to δ
_MAX_OUTCOMES = 2_000_000  # shuffle_log_pmfs returns dicts; beyond this they would take gigabytes
_RDP_BLOCK = 1 / 512  # relative width of a block of c values bounded by the moment of its first c
_RDP_SLACK = 50.0  # truncated Rényi terms are kept below e^-50 of the sum (which is ≥ 1) ...
_RDP_TIER_CAP = 4096.0  # ... while (α − 1)ε0 + 50 is below this


def _binom():
    # scipy.stats loads in ~0.4 s; every `dpfl privacy …` command and run imports this module,
    # and only shuffle accounting needs it.
    from scipy.stats import binom

    return binom


def _real(name: str, value: object, ok: Callable[[float], bool], allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number {allowed}; got {value!r}.")
    if not ok(float(value)):  # NaN fails every comparison, so it is rejected too
        raise ValueError(f"`{name}` must be {allowed}; got {value!r}.")
    return float(value)


def _check_common(local_epsilon: object, num_users: object) -> tuple[float, int]:
    eps0 = _real("local_epsilon", local_epsilon, lambda v: 0 < v < math.inf, "> 0 and finite")
    if isinstance(num_users, bool) or not isinstance(num_users, (int, np.integer)) or num_users < 1:
        raise ValueError(f"`num_users` must be an integer >= 1; got {num_users!r}.")
    return eps0, int(num_users)


def _c_window(m: int, p: float, tail: float) -> tuple[int, int]:
    # ~`tail` of C ~ Bin(m, p) on each side of [lo, hi]; binom.isf rounds tiny tails off, so mirror m − C.
    lo = int(max(_binom().ppf(tail, m, p), 0))
    return lo, m - int(max(_binom().ppf(tail, m, 1 - p), 0))


def _log_pmf(x: np.ndarray, n: int, p: float) -> np.ndarray:
    # log Bin(x; n, p): binom.logpmf is off by ~1e-9 at n = 10^6, so log(pmf) unless the pmf underflows.
    pmf = _binom().pmf(x, n, p)
    return np.where(pmf > 1e-300, np.log(np.maximum(pmf, 1e-300)), _binom().logpmf(x, n, p))


def _grid(c: np.ndarray, x_lo: np.ndarray, eps0: float) -> tuple[np.ndarray, ...]:
    # Rows c, columns x = x_lo + j up to c + 1 − x_lo (symmetric about (c + 1)/2, so the kept outcomes of P
    # and Q mirror each other): x, valid, log 2B_N(x), log(q u + q̄(1 − u)), log(q̄ u + q(1 − u)). log B_N is
    # its accurate value at the centre plus log B(y + 1)/B(y) summed outward (error ~1e-13 at N = 10^6),
    # and B_N is symmetric, so x below the centre reuse the values above it.
    width = int((c + 2 - 2 * x_lo).max())
    big_n, x_lo, centre = (c + 1)[:, None], x_lo[:, None], (c[:, None] + 2) // 2
    x, y = x_lo + np.arange(width), centre + np.arange(width)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.cumsum(np.log1p((big_n - 2 * y[:, :-1] - 1) / (y[:, :-1] + 1)), axis=1)
        upper = np.log(_binom().pmf(centre, big_n, 0.5)) + np.pad(steps, ((0, 0), (1, 0)))
    valid = x <= big_n - x_lo
    index = np.clip(np.where(x >= centre, x - centre, big_n - x - centre), 0, width - 1)
    log_b = np.where(valid, math.log(2) + np.take_along_axis(upper, index, axis=1), -np.inf)
    lq, lqbar, u = log_expit(eps0), log_expit(-eps0), np.minimum(x, big_n) / big_n
    with np.errstate(divide="ignore"):  # in logs, so that q̄ = e^{-1000}/(1 + e^{-1000}) does not underflow
        log_u, log_1u = np.log(u), np.log1p(-u)
    return x, valid, log_b, np.logaddexp(lq + log_u, lqbar + log_1u), np.logaddexp(lqbar + log_u, lq + log_1u)


def shuffle_log_pmfs(
    *, local_epsilon: float, num_users: int, tail_mass: float = 1e-15
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float], float]:
    """Log pmfs of the dominating pair (P, Q) of FMT21 Theorem 3.2, over outcomes (a, b).

    Values of C beyond its ``tail_mass / 4`` quantiles and, for each kept c, values of a beyond the
    ``tail_mass / 4`` quantiles of Bin(c, 1/2) (on both sides, symmetrically) are left out. The mass left
    out is computed from binomial cdfs, not as 1 − Σ kept (which would cancel), and is the same for P and Q;
    callers must add it to δ (or give it infinite privacy loss). ``tail_mass=0`` keeps every outcome.
    About 16 σ_C √c outcomes are kept: 44,000 for ε0 = 8, n = 10^6 (0.1 s), but 4·10^7 for ε0 = 1; above
    2,000,000 a ValueError says so (`shuffle_delta` and `shuffle_rdp` do not need the dicts).

    Args:
        local_epsilon: ε0 > 0 of each user's local randomizer.
        num_users: number n ≥ 1 of shuffled users.
        tail_mass: roughly how much mass, in [0, 1), may be left out; the exact amount is returned.

    Returns:
        (log P, log Q, dropped): dicts from (a, b) to log probability, and the mass left out of each.
    """
    eps0, n = _check_common(local_epsilon, num_users)
    tail = _real("tail_mass", tail_mass, lambda v: 0 <= v < 1, "in [0, 1)")
    m, p = n - 1, math.exp(-eps0)
    lo, hi = _c_window(m, p, tail / 4)
    c = np.arange(lo, hi + 1)
    x_lo = np.maximum(_binom().ppf(tail / 4, c, 0.5), 0).astype(np.int64)
    if (size := int((c + 2 - 2 * x_lo).sum())) > _MAX_OUTCOMES:
        msg = f"`num_users` = {n} with `local_epsilon` = {eps0} gives {size:,} outcomes (at most 2,000,000)"
        raise ValueError(msg + "; use shuffle_delta or shuffle_rdp, which do not enumerate them.")
    log_w = _log_pmf(c, m, p)
    x, valid, log_b, log_up, log_down = _grid(c, x_lo, eps0)
    log_b = log_b + log_w[:, None]
    # Left out for a kept c: P_c(x < x_lo) + P_c(x > c + 1 − x_lo) = P_c(x < x_lo) + Q_c(x < x_lo)
    # = P(A ≤ x_lo − 2) + P(A ≤ x_lo − 1) with A ~ Bin(c, 1/2), because q + q̄ = 1.
    inner = _binom().cdf(x_lo - 2, c, 0.5) + _binom().cdf(x_lo - 1, c, 0.5)
    dropped = float(_binom().cdf(lo - 1, m, p) + _binom().sf(hi, m, p) + np.exp(log_w) @ inner)
    keys = list(zip(x[valid].tolist(), (c[:, None] + 1 - x)[valid].tolist(), strict=True))
    log_p, log_q = (log_b + log_up)[valid].tolist(), (log_b + log_down)[valid].tolist()
    return dict(zip(keys, log_p, strict=True)), dict(zip(keys, log_q, strict=True)), dropped


def _delta_curve(eps0: float, n: int) -> Callable[[float], float]:
    # ε ↦ δ(ε); the window of C and its weights are shared by every ε of a bisection.
    m, p, q = n - 1, math.exp(-eps0), float(expit(eps0))
    lo, hi = _c_window(m, p, _DELTA_TAIL)
    c, dropped = np.arange(lo, hi + 1), float(_binom().cdf(lo - 1, m, p) + _binom().sf(hi, m, p))
    weights = _binom().pmf(c, m, p)

    def delta(eps: float) -> float:
        if eps >= eps0:
            return 0.0  # P ≤ e^{ε0} Q pointwise
        # {P_c > e^ε Q_c} = {x > β(c + 1)}: solve q u + q̄(1 − u) > e^ε (q̄ u + q(1 − u)) for u = x/(c + 1).
        beta = math.expm1(-eps0 - eps) / (math.expm1(-eps0) * (1 + math.exp(-eps)))
        k = np.minimum(np.floor(beta * (c + 1)), c)
        mid, tail = _binom().pmf(k, c, 0.5), _binom().sf(k, c, 0.5)
        below, above = mid * k / (c - k + 1), mid * (c - k) / (k + 1)  # B_c(k − 1), B_c(k + 1)
        # Σ_{x≥t}(P_c − e^ε Q_c) = q(1 − e^{ε−ε0}) B_c(t − 1) − (e^ε − 1) P(A ≥ t), A ~ B_c, is below the
        # hockey-stick for any t and equal at t = k + 1: the best of k, k + 1, k + 2 absorbs rounding in k.
        # Capping e^ε − 1 (at ε > 690) can only raise δ.
        gain, growth = -q * math.expm1(eps - eps0), math.expm1(min(eps, 690.0))
        best = np.maximum(gain * mid - growth * tail, gain * below - growth * (tail + mid))
        best = np.maximum(best, gain * above - growth * np.maximum(tail - above, 0.0))
        return min(max(float(weights @ np.maximum(best, 0.0)) + dropped, 0.0), 1.0)

    return delta


def shuffle_delta(*, epsilon: float, local_epsilon: float, num_users: int) -> float:
    """δ(ε) of n shuffled ε0-DP reports: the hockey-stick divergence D_{e^ε}(P‖Q) of FMT21 Theorem 3.2.

    Per c, a difference of Bin(c, 1/2) tail probabilities (FMT21 Appendix E's "B"), exact and vectorised
    over c. C is truncated at its 10^-18 quantiles and the mass dropped is added: an upper bound to ~1e-15.

    Args:
        epsilon: ε ≥ 0.
        local_epsilon: ε0 > 0 of each user's local randomizer.
        num_users: number n ≥ 1 of shuffled users.

    Returns:
        δ in [0, 1]; exactly 0 for ε ≥ ε0.
    """
    eps0, n = _check_common(local_epsilon, num_users)
    eps = _real("epsilon", epsilon, lambda v: 0 <= v < math.inf, ">= 0 and finite")
    return _delta_curve(eps0, n)(eps)


def shuffle_epsilon(*, delta: float, local_epsilon: float, num_users: int) -> float:
    """Smallest ε in [0, ε0] with `shuffle_delta` ≤ δ: the shuffled (ε, δ)-DP guarantee (FMT21 Thm 3.2).

    Bisection to relative tolerance 10^-6, returning the upper end of the final bracket, which always has
    δ(ε) ≤ δ, so the result is sound. Never above ε0, as δ(ε0) = 0 (shuffling never hurts).

    Args:
        delta: target δ in (0, 1).
        local_epsilon: ε0 > 0 of each user's local randomizer.
        num_users: number n ≥ 1 of shuffled users.

    Returns:
        ε in [0, ε0].
    """
    eps0, n = _check_common(local_epsilon, num_users)
    target = _real("delta", delta, lambda v: 0 < v < 1, "in (0, 1)")
    lo, hi, curve = 0.0, eps0, _delta_curve(eps0, n)
    if curve(0.0) <= target:
        return 0.0
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if curve(mid) <= target else (mid, hi)
    return hi


def _blocks(m: int, p: float, log_moment_cap: float) -> tuple[np.ndarray, np.ndarray]:
    # First c and log mass of blocks [reps[j], reps[j + 1]), [reps[-1], m] of C. [0, lo) is bounded with E_0 ≤
    # e^{log_moment_cap} and Chernoff, log P(C ≤ k) ≤ −m KL(k/m ‖ p); lo makes that ~e^-50.
    mean, sd = m * p, math.sqrt(m * p * (1 - p))
    lo = max(0, math.floor(mean - sd * math.sqrt(2 * (log_moment_cap + _RDP_SLACK)) - 1))
    hi, start = min(m, math.ceil(mean + 12 * sd) + 1), max(lo, 512)
    k = np.arange(math.ceil(math.log(max(hi, start) / start) / math.log1p(_RDP_BLOCK)) + 1)
    geometric = np.floor(start * (1 + _RDP_BLOCK) ** k).astype(np.int64)
    reps = np.unique(np.concatenate([[0], np.arange(lo, min(hi, 511) + 1), geometric[geometric <= hi]]))
    log_mass = np.full(reps.size, m * math.log1p(-p))  # log P(C = 0), the first block when lo = 0
    if lo:
        log_mass[0] = -float(rel_entr(lo - 1, m * p) + rel_entr(m - lo + 1, m - m * p))
    if reps.size > 2:
        window = _log_pmf(np.arange(reps[1], reps[-1]), m, p)
        log_mass[1:-1] = np.logaddexp.reduceat(window, reps[1:-1] - reps[1])
    log_mass[-1] = _binom().logsf(reps[-1] - 1, m, p)
    return reps.astype(np.int64), log_mass


def _log_moments(reps: np.ndarray, alphas: np.ndarray, eps0: float, tier: float) -> np.ndarray:
    # Upper bounds on log E_r(α) = log Σ_x P_r^α Q_r^{1−α}, [orders, reps]. x within d ≥ √(r·tier/2) of
    # (r + 1)/2 is kept; by Hoeffding the rest has P_r-mass ≤ 2e^{−2d²/r} and adds ≤ that · e^{(α−1)ε0}.
    x_lo = np.clip(np.floor(reps / 2 + 1 - np.sqrt(reps * tier / 2)), 0, reps // 2).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_drop = np.where(x_lo > 0, math.log(2) - 2 * (reps / 2 - x_lo + 1) ** 2 / reps, -np.inf)
    out = np.empty((alphas.size, reps.size))
    chunks = np.array_split(np.arange(reps.size), math.ceil(reps.size / 64))  # similar widths: little padding
    for rows in chunks:
        _, _, log_b, log_up, log_down = _grid(reps[rows], x_lo[rows], eps0)
        base, ratio = log_b + log_down, log_up - log_down  # log P^α Q^{1−α} = base + α·ratio
        for i, a in enumerate(alphas):  # a row-wise logsumexp, twice as fast as scipy's
            terms = base + a * ratio
            peak = terms.max(axis=1)  # finite: every row has a valid x
            out[i, rows] = np.log(np.exp(terms - peak[:, None]).sum(axis=1)) + peak
    return np.logaddexp(out, log_drop + (alphas[:, None] - 1) * eps0)


def shuffle_rdp(*, orders: np.ndarray, local_epsilon: float, num_users: int) -> np.ndarray:
    """Upper bounds on the Rényi divergence D_α(P‖Q) of the FMT21 Theorem 3.2 pair, one per order.

    D_α = log(Σ_c Bin(c) E_c(α)) / (α − 1), E_c(α) = Σ_x P_c^α Q_c^{1−α}, in log space. Truncation is made
    sound by facts (2), (3) of the module docstring. By (3) and data processing E_c falls with c: a block is
    bounded by its mass times E at its first c. Blocks are single values below 512 and of relative width 1/512
    above (E_c − 1 scales like 1/c): within ~0.2% of the exact D_α, and exact for n ≤ 512. One block below
    a low quantile of C uses E_0 and a Chernoff bound on its mass (adding ~e^-50). As P ≤ e^{ε0} Q, x-tails
    left out of E_c add at most their mass times e^{(α−1)ε0}: below e^-50 while (α − 1)ε0 < ~4000, looser
    (still sound) above. Results are capped at D_α of ε0-randomized response (the n = 1 pair, ≤ ε0), which
    bounds every ε0-DP pair, then made non-decreasing in α by a running minimum from the top order (D_α of
    any pair is, so a bound at α' ≥ α bounds D_α). n = 10^6 with 156 orders up to 1024 takes 1–3 s.

    Args:
        orders: Rényi orders α, finite and > 1 (any shape).
        local_epsilon: ε0 > 0 of each user's local randomizer.
        num_users: number n ≥ 1 of shuffled users.

    Returns:
        Array shaped like `orders`: the RDP ε(α) of the shuffled mechanism.
    """
    eps0, n = _check_common(local_epsilon, num_users)
    alphas = np.asarray(orders, dtype=float)
    if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas <= 1):
        raise ValueError(f"`orders` must be non-empty, finite and > 1; got {alphas.tolist()!r}.")
    flat, m, p = alphas.ravel(), n - 1, math.exp(-eps0)
    log_rr = np.logaddexp(flat * eps0, (1 - flat) * eps0) - np.logaddexp(0.0, eps0)  # log E_0(α)
    # Orders share grids in tiers of (α − 1)ε0, so that low orders keep small grids.
    need = np.clip((flat - 1) * eps0 + _RDP_SLACK + math.log(2), 64, _RDP_TIER_CAP)
    tiers = 64 * 2 ** np.ceil(np.log2(need / 64))
    rdp = np.empty(flat.size)
    for tier in np.unique(tiers):
        idx = np.flatnonzero(tiers == tier)
        reps, log_mass = _blocks(m, p, float(log_rr[idx].max()))
        log_e = _log_moments(reps, flat[idx], eps0, tier)
        rdp[idx] = np.minimum(logsumexp(log_e + log_mass, axis=1), log_rr[idx]) / (flat[idx] - 1)
    order = np.argsort(flat, kind="stable")
    rdp[order] = np.minimum.accumulate(rdp[order][::-1])[::-1]
    return np.maximum(rdp, 0.0).reshape(alphas.shape)


def shuffle_closed_form_epsilon(*, delta: float, local_epsilon: float, num_users: int) -> float:
    """The closed-form shuffled ε of FMT21 Theorem 3.1 (arXiv 2012.12803):

        ε = log(1 + (e^{ε0} − 1)/(e^{ε0} + 1) · (8 √(e^{ε0} log(4/δ)) / √n + 8 e^{ε0} / n)),

    valid when ε0 ≤ log(n / (16 log(2/δ))), as in OpenDP smartnoise-core ("theorem 3.1"); Apple's reference
    code has a slightly larger factor, (1 − e^{−ε0}) / (1 + e^{−ε0−ε'}). `shuffle_epsilon` is tighter.

    Args:
        delta: δ in (0, 1).
        local_epsilon: ε0 > 0 of each user's local randomizer.
        num_users: number n ≥ 1 of shuffled users.

    Returns:
        ε > 0.

    Raises:
        ValueError: on invalid arguments, or ε0 outside the theorem's range.
    """
    eps0, n = _check_common(local_epsilon, num_users)
    target = _real("delta", delta, lambda v: 0 < v < 1, "in (0, 1)")
    if eps0 > (limit := math.log(n / (16 * math.log(2 / target)))):
        msg = f"`local_epsilon` must be <= log(n / (16 log(2/δ))) = {limit:.6g} for `num_users` = {n} and "
        raise ValueError(
            msg + f"`delta` = {target!r} (FMT21 Theorem 3.1); got {eps0!r}. Use shuffle_epsilon."
        )
    shrink = 8 * math.sqrt(math.exp(eps0) * math.log(4 / target) / n) + 8 * math.exp(eps0) / n
    return math.log1p(math.tanh(eps0 / 2) * shrink)

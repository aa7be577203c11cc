"""Tests of the noisy-argmax (GNMax) RDP analysis in `dpfl.privacy.gnmax`.

Reference numbers come from the project's notes on the voting paper
(`shared/reference/003_voting_dpfl.md`, "the notes" below) and from tensorflow/privacy's PATE 2018 code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erfc, erfcinv, log_ndtr

from dpfl.privacy.conversion import rdp_to_epsilon
from dpfl.privacy.gnmax import (
    gnmax_log_q,
    gnmax_rdp,
    gnmax_rdp_data_independent,
    gnmax_rdp_from_log_q,
)


def _classic(orders, rdp, delta):
    # Mironov 2017 Prop. 3, the voting paper's Lemma 10.
    return float(rdp_to_epsilon(orders, rdp, delta=delta, conversion="classic"))


# Digits setting of the voting paper (Table 1, AE-DPFL, agent-level): N = 200 agents, C = 10 classes,
# sigma = 25, Q = 500 queries, delta = 1e-3, sensitivity 1.
SIGMA, QUERIES, DELTA, N_AGENTS, N_CLASSES = 25.0, 500, 1e-3, 200, 10
DENSE_ORDERS = np.round(np.arange(1.01, 200.0 + 1e-9, 0.01), 2)  # 1.01, 1.02, ..., 200.00


def _unanimous_like(gap: int) -> list[float]:
    # The notes' "gap g" histograms: the top class has g votes and the nine others none.
    return [float(gap)] + [0.0] * (N_CLASSES - 1)


def _digits_eps(counts: list[float]) -> float:
    rdp = QUERIES * gnmax_rdp(DENSE_ORDERS, counts, noise_std=SIGMA, sensitivity=1.0)
    return _classic(DENSE_ORDERS, rdp, DELTA)


def test_digits_data_independent_classic_conversion_is_3_72():
    rdp = QUERIES * gnmax_rdp_data_independent(DENSE_ORDERS, noise_std=SIGMA, sensitivity=1.0)
    eps = _classic(DENSE_ORDERS, rdp, DELTA)
    # Notes §3.5 / §6.5: rho = Q / (2 sigma^2) = 0.4 and, optimising alpha continuously,
    # eps = rho + 2 sqrt(rho log(1/delta)) = 3.7246; the 0.01 grid is within 1e-4 of that optimum.
    rho = QUERIES / (2 * SIGMA**2)
    assert rho == pytest.approx(0.4)
    assert eps == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / DELTA)), abs=1e-4)
    assert round(eps, 2) == 3.72


def test_digits_data_independent_dp_accounting_conversion_is_about_3_09():
    rdp = QUERIES * gnmax_rdp_data_independent(DENSE_ORDERS, noise_std=SIGMA, sensitivity=1.0)
    eps, _ = compute_epsilon(DENSE_ORDERS, rdp, DELTA)
    # Notes §3.5: the tighter Balle/Canonne conversion gives 3.09 for the same RDP curve.
    assert eps == pytest.approx(3.0893, abs=1e-3)
    assert eps < _classic(DENSE_ORDERS, rdp, DELTA)


@pytest.mark.parametrize(
    ("gap", "ours", "notes"),
    [
        # ours: this module (PATE Theorem 6 + Proposition 7), computed once and pinned here.
        # notes: §3.4 "Our numerical check" (Lemma 15 of the voting paper + PATE Proposition 7 q).
        (200, 0.17681, 0.219),
        (180, 0.23003, 0.326),
        (150, 0.42096, 0.875),
    ],
)
def test_digits_data_dependent_unanimous_queries(gap, ours, notes):
    eps = _digits_eps(_unanimous_like(gap))
    assert eps == pytest.approx(ours, abs=2e-5)
    # Theorem 6 is tighter than Lemma 15 (a Cauchy-Schwarz simplification of it), so we sit below the
    # notes, by a factor that grows as the margin shrinks (1.24x at gap 200, 2.08x at gap 150); see
    # test_notes_numbers_are_reproduced_by_lemma15.
    assert 0.45 * notes < eps < notes
    assert eps < 3.72


def test_digits_data_dependent_with_histograms_summing_to_n():
    # With all 200 agents voting, a gap of 180 is [190, 10, 0, ...]: a smaller q than [180, 0, ...].
    eps = _digits_eps([190.0, 10.0] + [0.0] * 8)
    assert eps == pytest.approx(0.20569, abs=2e-5)
    assert _digits_eps(_unanimous_like(N_AGENTS)) < eps < _digits_eps(_unanimous_like(180))


def _lemma15_rdp(orders: np.ndarray, q: float) -> np.ndarray:
    # Voting paper Lemma 15 as its proof gives it (notes §3.4), for M (2a, a/sigma^2)-RDP (s = 1):
    # D_a <= -log(1-q) + log(1 + (1-q)^(a-1) q^(1/2) e^((2a-1) eps(2a) / 2)) / (a-1).
    eps_2a = orders / SIGMA**2
    return -math.log1p(-q) + np.log1p(
        (1 - q) ** (orders - 1) * math.sqrt(q) * np.exp((2 * orders - 1) * eps_2a / 2)
    ) / (orders - 1)


@pytest.mark.parametrize(("gap", "notes"), [(200, 0.219), (180, 0.326), (150, 0.875)])
def test_notes_numbers_are_reproduced_by_lemma15(gap, notes):
    # Explains the gap to the notes: their scratch script used Lemma 15, not Theorem 6, with our q.
    q = math.exp(gnmax_log_q(_unanimous_like(gap), noise_std=SIGMA))
    indep = gnmax_rdp_data_independent(DENSE_ORDERS, noise_std=SIGMA, sensitivity=1.0)
    rdp = QUERIES * np.minimum(indep, _lemma15_rdp(DENSE_ORDERS, q))
    assert _classic(DENSE_ORDERS, rdp, DELTA) == pytest.approx(notes, abs=5e-4)


def test_tf_privacy_pate_2018_smooth_sensitivity_reference_values():
    # tensorflow/privacy research/pate_2018/smooth_sensitivity_test.py,
    # test_compute_local_sensitivity_bounds_gnmax: counts [10, 0, 0], sigma 0.5, order 1.5, 10 teachers,
    # answer1[:3] = local sensitivity of the Theorem-6 RDP at distances 0, 1, 2. PATE's GNMax has
    # eps(l) = l / sigma^2, i.e. sensitivity sqrt(2). bu/bl are PATE's bounds on a neighbour's q
    # (Proposition 13): (m-1)/2 erfc(erfcinv(2q/(m-1)) -+ 1/sigma).
    sigma, order, m = 0.5, np.array([1.5]), 3

    def beta(log_q: float) -> float:
        return float(gnmax_rdp_from_log_q(order, log_q=log_q, noise_std=sigma, sensitivity=math.sqrt(2))[0])

    def local_sensitivity(counts: list[float]) -> float:
        log_q = gnmax_log_q(counts, noise_std=sigma)
        x = erfcinv(2 * math.exp(log_q) / (m - 1))
        q_up = min(1.0, (m - 1) / 2 * erfc(x - 1 / sigma))
        q_low = (m - 1) / 2 * erfc(x + 1 / sigma)
        return max(beta(math.log(q_up)) - beta(log_q), beta(log_q) - beta(math.log(q_low)))

    expected = [3.13503646e-17, 1.60178280e-08, 5.90681786e-03]
    got = [local_sensitivity(c) for c in ([10, 0, 0], [9, 1, 0], [8, 2, 0])]
    np.testing.assert_allclose(got, expected, rtol=1e-7)


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(0, 300), min_size=2, max_size=12),
    noise_std=st.floats(0.1, 100.0),
    sensitivity=st.sampled_from([1.0, math.sqrt(2.0), math.sqrt(2.0 / 5), math.sqrt(2.0 / 50)]),
)
def test_data_dependent_never_exceeds_data_independent(counts, noise_std, sensitivity):
    orders = np.concatenate([np.linspace(1.01, 10, 40), np.linspace(10, 500, 60)])
    indep = gnmax_rdp_data_independent(orders, noise_std=noise_std, sensitivity=sensitivity)
    dep = gnmax_rdp(orders, counts, noise_std=noise_std, sensitivity=sensitivity)
    assert np.all(dep <= indep)
    assert np.all(dep >= 0)
    assert np.all(np.isfinite(dep))


@pytest.mark.parametrize("counts", [[100, 99, 50, 0], [5, 5], [3.0, 2.5, 2.5, 0.0]])
def test_near_tie_gives_data_independent_bound(counts):
    orders = np.linspace(1.1, 100, 50)
    indep = gnmax_rdp_data_independent(orders, noise_std=SIGMA, sensitivity=1.0)
    np.testing.assert_array_equal(gnmax_rdp(orders, counts, noise_std=SIGMA, sensitivity=1.0), indep)


def test_log_q_upper_bounds_monte_carlo():
    counts, sigma, n = np.array([10.0, 6.0, 5.0, 1.0]), 2.0, 200_000
    rng = np.random.default_rng(20240601)
    wrong = np.argmax(counts + sigma * rng.standard_normal((n, counts.size)), axis=1) != 0
    mc, se = wrong.mean(), wrong.std() / math.sqrt(n)
    q = math.exp(gnmax_log_q(counts, noise_std=sigma))
    # Proposition 7 is a union bound: above the truth, but not far above with 3 rivals.
    assert mc <= q + 3 * se
    assert q <= 1.5 * mc


def test_log_q_closed_form_cap_and_deep_tail():
    # Two classes: the bound is exact, Phi(-gap / (sqrt(2) sigma)).
    assert gnmax_log_q([7, 3], noise_std=2.0) == pytest.approx(float(log_ndtr(-4 / (2 * math.sqrt(2)))))
    # A three-way tie would give 1 by the union bound; the cap is (C-1)/C (PATE core.py).
    assert gnmax_log_q([1, 1, 1], noise_std=1.0) == pytest.approx(math.log(2 / 3))
    # Far in the tail log q stays finite: log Phi(-x) ~ -x^2/2 with x = 1e4/sqrt(2).
    assert gnmax_log_q([1e4, 0], noise_std=1.0) == pytest.approx(-2.5e7, rel=1e-5)


def test_bound_is_sound_against_exact_divergence_for_two_classes():
    # With C = 2 the output is Bernoulli(Phi(-(v0 - v1) / (sqrt(2) sigma))), so D_l(M(D) || M(D')) is
    # exact; Theorem 6 must be above it for every neighbour D' (agent-level: one vote added or removed;
    # instance-level AE-DPFL: one vote moved).
    orders = np.concatenate([np.linspace(1.05, 5, 20), np.linspace(5, 200, 40)])

    def log_probs(v: np.ndarray, sigma: float) -> np.ndarray:
        z = (v[0] - v[1]) / (math.sqrt(2) * sigma)
        return np.array([log_ndtr(z), log_ndtr(-z)])

    cases = [(1.0, [(1, 0), (-1, 0), (0, 1), (0, -1)]), (math.sqrt(2), [(1, -1), (-1, 1)])]
    data_dependent_used = 0
    for sensitivity, moves in cases:
        for sigma in (0.5, 2.0, 10.0):
            indep = gnmax_rdp_data_independent(orders, noise_std=sigma, sensitivity=sensitivity)
            for n0 in np.linspace(0, 12 * sigma, 13).round():
                v = np.array([n0, 1.0])
                bound = gnmax_rdp(orders, v, noise_std=sigma, sensitivity=sensitivity)
                data_dependent_used += int(np.sum(bound < indep))
                p = log_probs(v, sigma)
                for move in moves:
                    r = log_probs(v + np.array(move), sigma)
                    terms = orders[:, None] * p + (1 - orders[:, None]) * r
                    exact = np.logaddexp.reduce(terms, axis=1) / (orders - 1)
                    assert np.all(bound >= exact)
    assert data_dependent_used > 100  # the check exercised Theorem 6, not only the fallback


def test_only_effective_noise_multiplier_matters_given_q():
    # eps(l) = l s^2 / (2 sigma^2) = l / sigma_eff^2: (sigma, s) and (sigma sqrt(2)/s, sqrt(2)) agree.
    orders = np.linspace(1.1, 60, 30)
    a = gnmax_rdp_from_log_q(orders, log_q=-30.0, noise_std=5.0, sensitivity=1.0)
    b = gnmax_rdp_from_log_q(orders, log_q=-30.0, noise_std=5.0 * math.sqrt(2), sensitivity=math.sqrt(2))
    np.testing.assert_allclose(a, b, rtol=1e-12)
    assert np.any(a < gnmax_rdp_data_independent(orders, noise_std=5.0, sensitivity=1.0))
    # PATE Proposition 8: with sensitivity sqrt(2) the data-independent curve is l / sigma^2.
    np.testing.assert_allclose(
        gnmax_rdp_data_independent(orders, noise_std=3.0, sensitivity=math.sqrt(2)), orders / 9.0
    )


def test_classic_conversion_picks_the_best_order():
    orders = np.array([2.0, 5.0, 11.0])
    rdp = np.array([0.1, 1.0, np.inf])
    # min(0.1 + log(100)/1, 1.0 + log(100)/4, inf) = 1 + 1.1513 (Mironov 2017, Prop. 3).
    assert _classic(orders, rdp, 0.01) == pytest.approx(1.0 + math.log(100) / 4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: gnmax_log_q([3, 1], noise_std=0), "`noise_std` must be > 0 and finite; got 0."),
        (lambda: gnmax_log_q([3], noise_std=1.0), "`counts` must be a 1-D histogram with at least 2"),
        (lambda: gnmax_log_q([3, float("nan")], noise_std=1.0), "`counts` must all be finite"),
        (
            lambda: gnmax_rdp_data_independent(np.array([1.0, 2.0]), noise_std=1, sensitivity=1),
            "`orders` must all be finite and > 1; got min 1.0",
        ),
        (
            lambda: gnmax_rdp(np.array([2.0]), [3, 1], noise_std=1.0, sensitivity=-1.0),
            "`sensitivity` must be > 0 and finite; got -1.0.",
        ),
        (
            lambda: gnmax_rdp_from_log_q(np.array([2.0]), log_q=0.5, noise_std=1, sensitivity=1),
            "`log_q` must be <= 0 (a log-probability); got 0.5.",
        ),
    ],
)
def test_invalid_inputs_are_rejected_with_clear_messages(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(message)

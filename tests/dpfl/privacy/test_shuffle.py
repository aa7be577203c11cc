"""Tests of the numerical amplification-by-shuffling bounds in `dpfl.privacy.shuffle`.

Reference: Feldman, McMillan & Talwar, "Hiding Among the Clones", FOCS 2021 (arXiv 2012.12803, "FMT21"),
and its reference code, github.com/apple/ml-shuffling-amplification ("Apple's code" below).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfl.privacy.shuffle import (
    shuffle_closed_form_epsilon,
    shuffle_delta,
    shuffle_epsilon,
    shuffle_log_pmfs,
    shuffle_rdp,
)

SMALL_CASES = [(1.0, 5), (0.5, 20), (3.0, 20), (2.0, 1), (6.0, 12)]


def _brute_pair(eps0: float, n: int) -> tuple[dict, dict]:
    # FMT21 Theorem 3.2 straight from its definition: enumerate C, A and Δ with exact binomial
    # coefficients, in plain Python, no truncation.
    p, q = math.exp(-eps0), math.exp(eps0) / (math.exp(eps0) + 1)
    pmf_p, pmf_q = defaultdict(float), defaultdict(float)
    for c in range(n):
        w_c = math.comb(n - 1, c) * p**c * (1 - p) ** (n - 1 - c)
        for a in range(c + 1):
            w = w_c * math.comb(c, a) / 2**c
            for d, w_d in ((1, q), (0, 1 - q)):
                pmf_p[(a + d, c - a + 1 - d)] += w * w_d
                pmf_q[(a + 1 - d, c - a + d)] += w * w_d
    return dict(pmf_p), dict(pmf_q)


def _hockey_stick(pmf_p: dict, pmf_q: dict, eps: float) -> float:
    return sum(max(0.0, pr - math.exp(eps) * pmf_q.get(k, 0.0)) for k, pr in pmf_p.items())


def _rr_rdp(orders: np.ndarray, eps0: float) -> np.ndarray:
    # Rényi divergence of ε0-randomized response: (e^{αε0} + e^{(1−α)ε0}) / (1 + e^{ε0}).
    return (np.logaddexp(orders * eps0, (1 - orders) * eps0) - np.log1p(np.exp(eps0))) / (orders - 1)


# --- exactness against brute force -----------------------------------------------------------------


@pytest.mark.parametrize(("eps0", "n"), SMALL_CASES)
def test_delta_matches_brute_force_enumeration(eps0, n):
    pmf_p, pmf_q = _brute_pair(eps0, n)
    for eps in [0.0, 0.05, 0.2, 0.5 * eps0, 0.99 * eps0]:
        expected = _hockey_stick(pmf_p, pmf_q, eps)
        assert expected > 0
        assert shuffle_delta(epsilon=eps, local_epsilon=eps0, num_users=n) == pytest.approx(
            expected, abs=1e-12
        )


@pytest.mark.parametrize(("eps0", "n"), SMALL_CASES)
def test_log_pmfs_match_brute_force_enumeration(eps0, n):
    pmf_p, pmf_q = _brute_pair(eps0, n)
    log_p, log_q, dropped = shuffle_log_pmfs(local_epsilon=eps0, num_users=n, tail_mass=0.0)
    assert dropped == 0.0
    assert set(log_p) == set(pmf_p) == set(log_q) == set(pmf_q)
    for k in pmf_p:
        assert math.exp(log_p[k]) == pytest.approx(pmf_p[k], rel=1e-12, abs=1e-15)
        assert math.exp(log_q[k]) == pytest.approx(pmf_q[k], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("eps0", "n"), SMALL_CASES)
def test_rdp_matches_brute_force_enumeration(eps0, n):
    pmf_p, pmf_q = _brute_pair(eps0, n)
    orders = np.array([1.01, 1.5, 2.0, 5.0, 20.0, 64.0])
    expected = [
        math.log(sum(pr * (pr / pmf_q[k]) ** (a - 1) for k, pr in pmf_p.items())) / (a - 1) for a in orders
    ]
    rdp = shuffle_rdp(orders=orders, local_epsilon=eps0, num_users=n)
    np.testing.assert_allclose(rdp, expected, rtol=1e-10, atol=1e-14)


def test_pmfs_are_symmetric_and_account_for_every_truncated_outcome():
    log_p, log_q, dropped = shuffle_log_pmfs(local_epsilon=3.0, num_users=2000)
    assert all(log_q[(b, a)] == pytest.approx(lp, abs=1e-12) for (a, b), lp in log_p.items())
    assert 0 < dropped <= 1e-15
    assert math.fsum(math.exp(v) for v in log_p.values()) + dropped == pytest.approx(1.0, abs=1e-12)
    # The hockey-stick of the truncated dicts plus what they leave out bounds δ, and nearly equals it.
    pmf_p = {k: math.exp(v) for k, v in log_p.items()}
    pmf_q = {k: math.exp(v) for k, v in log_q.items()}
    for eps in [0.05, 0.3, 1.0]:
        exact = shuffle_delta(epsilon=eps, local_epsilon=3.0, num_users=2000)
        assert _hockey_stick(pmf_p, pmf_q, eps) + dropped == pytest.approx(exact, abs=1e-12)


def test_rdp_blocks_of_c_stay_within_their_documented_slack():
    # n = 2500, ε0 = 1 puts C around 920, where blocks of c share one moment (each an upper bound). The
    # truncated dicts give a lower bound on the exact divergence; the module must be above it by < 0.3%.
    log_p, log_q, _ = shuffle_log_pmfs(local_epsilon=1.0, num_users=2500, tail_mass=1e-20)
    lp, lq = np.array(list(log_p.values())), np.array([log_q[k] for k in log_p])
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    lower = np.array([np.logaddexp.reduce(a * lp - (a - 1) * lq) / (a - 1) for a in orders])
    rdp = shuffle_rdp(orders=orders, local_epsilon=1.0, num_users=2500)
    assert np.all(rdp >= lower * (1 - 1e-9))
    assert np.all(rdp <= lower * 1.003)


# --- n = 1: no amplification ------------------------------------------------------------------------


def test_one_user_is_randomized_response_without_amplification():
    eps0, delta = 1.5, 1e-6
    for eps in [0.0, 0.7, 1.4]:
        expected = (math.exp(eps0) - math.exp(eps)) / (math.exp(eps0) + 1)
        assert shuffle_delta(epsilon=eps, local_epsilon=eps0, num_users=1) == pytest.approx(
            expected, abs=1e-15
        )
    assert shuffle_delta(epsilon=0.999 * eps0, local_epsilon=eps0, num_users=1) > 1e-4
    assert shuffle_delta(epsilon=eps0, local_epsilon=eps0, num_users=1) == 0.0
    exact = math.log(math.exp(eps0) - delta * (math.exp(eps0) + 1))  # solves δ(ε) = delta
    eps = shuffle_epsilon(delta=delta, local_epsilon=eps0, num_users=1)
    assert exact <= eps <= exact * (1 + 2e-6)
    orders = np.array([1.5, 2.0, 10.0, 100.0])
    rdp = shuffle_rdp(orders=orders, local_epsilon=eps0, num_users=1)
    np.testing.assert_allclose(rdp, _rr_rdp(orders, eps0), rtol=1e-12)


# --- bounds and monotonicity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eps0", "n", "delta"),
    [(0.5, 1000, 1e-6), (1.0, 10_000, 1e-8), (2.0, 100_000, 1e-6), (4.0, 100_000, 1e-6), (6.0, 10**6, 1e-9)],
)
def test_numerical_epsilon_is_below_the_closed_form(eps0, n, delta):
    assert eps0 <= math.log(n / (16 * math.log(2 / delta)))  # inside FMT21 Theorem 3.1's range
    numeric = shuffle_epsilon(delta=delta, local_epsilon=eps0, num_users=n)
    assert 0 < numeric < shuffle_closed_form_epsilon(delta=delta, local_epsilon=eps0, num_users=n) < eps0


def test_epsilon_falls_as_users_are_added():
    eps = [shuffle_epsilon(delta=1e-6, local_epsilon=2.0, num_users=n) for n in (10, 100, 1000, 10**4, 10**5)]
    assert all(a > b for a, b in itertools.pairwise(eps))
    assert eps[-1] < 0.05  # 0.045 at n = 10^5, where Theorem 3.1's closed form gives 0.186


def test_epsilon_grows_with_the_local_epsilon():
    local = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    eps = [shuffle_epsilon(delta=1e-6, local_epsilon=e0, num_users=1000) for e0 in local]
    assert all(a < b for a, b in itertools.pairwise(eps))
    assert all(e < e0 for e, e0 in zip(eps[:-1], local, strict=False))
    # With ε0 = 8 and n = 1000 the expected number of clones is n e^{−ε0} = 0.34: C = 0 (randomized
    # response, no amplification) has probability 0.71, so nothing below ε0 holds at δ = 1e-6.
    assert eps[-1] == 8.0


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.floats(0.05, 10), st.integers(1, 20_000), st.floats(0, 1.2), st.floats(0, 1.2))
def test_delta_is_non_increasing_in_epsilon(eps0, n, a, b):
    small, large = sorted((a * eps0, b * eps0))
    d_small = shuffle_delta(epsilon=small, local_epsilon=eps0, num_users=n)
    d_large = shuffle_delta(epsilon=large, local_epsilon=eps0, num_users=n)
    assert 0 <= d_large <= d_small + 1e-15 <= 1 + 1e-15


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.floats(0.05, 12), st.integers(1, 50_000), st.floats(-12, -1))
def test_epsilon_is_sound_tight_and_never_above_the_local_epsilon(eps0, n, log10_delta):
    delta = 10.0**log10_delta
    eps = shuffle_epsilon(delta=delta, local_epsilon=eps0, num_users=n)
    assert 0 <= eps <= eps0
    assert shuffle_delta(epsilon=eps, local_epsilon=eps0, num_users=n) <= delta
    if eps > 0:  # the bisection's relative tolerance is 1e-6
        assert shuffle_delta(epsilon=eps * (1 - 2e-6), local_epsilon=eps0, num_users=n) > delta


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.floats(0.05, 8), st.integers(1, 3000))
def test_rdp_is_non_decreasing_in_order_and_at_most_the_local_bound(eps0, n):
    orders = np.array([1.01, 1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 256.0])
    rdp = shuffle_rdp(orders=orders, local_epsilon=eps0, num_users=n)
    assert np.all(np.diff(rdp) >= 0)
    assert np.all(rdp >= 0)
    assert np.all(rdp <= _rr_rdp(orders, eps0) * (1 + 1e-12)) and np.all(rdp <= eps0)


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 1000), (4.0, 10_000)])
def test_rdp_converted_to_dp_is_never_tighter_than_the_hockey_stick(eps0, n):
    # Both bound the same pair; RDP → (ε, δ) (Mironov 2017, Prop. 3) can only lose.
    orders = np.concatenate([np.linspace(1.1, 10, 45), np.geomspace(11.0, 256.0, 30)])
    rdp = shuffle_rdp(orders=orders, local_epsilon=eps0, num_users=n)
    via_rdp = float(np.min(rdp + math.log(1 / 1e-6) / (orders - 1)))
    direct = shuffle_epsilon(delta=1e-6, local_epsilon=eps0, num_users=n)
    assert direct < via_rdp < 1.5 * direct + 0.05


def test_shapes_and_extremes():
    rdp = shuffle_rdp(orders=np.array([[2.0], [10.0]]), local_epsilon=1.0, num_users=50)
    assert rdp.shape == (2, 1)
    # ε0 = 1000: no clone is ever drawn, so the pair is randomized response, computed without overflow.
    assert shuffle_delta(epsilon=999.0, local_epsilon=1000.0, num_users=10) == pytest.approx(1 - math.exp(-1))
    assert np.all(np.isfinite(shuffle_rdp(orders=np.array([2.0, 1e4]), local_epsilon=1000.0, num_users=9)))
    # n = 10^6 stays quick: δ by tail probabilities, and a dict only where it is small (large ε0).
    assert 0 < shuffle_epsilon(delta=1e-8, local_epsilon=1.0, num_users=10**6) < 0.01
    log_p, _, dropped = shuffle_log_pmfs(local_epsilon=8.0, num_users=10**6)
    assert 10_000 < len(log_p) < 100_000 and dropped <= 1e-15


# --- reference numbers -----------------------------------------------------------------------------


def test_matches_the_reference_implementations_numbers():
    # Apple's code README (example.py: n = 10^5, ε0 = 4, δ = 1e-6, 10 bisection steps from 0.5378): the
    # numerical ε "is between 0.1675385583317841 and 0.172790550755978". Their lower end is the upper end
    # of a bracket of width 0.5378/2^10, so the exact ε of the pair exceeds 0.16754 − 0.00053.
    eps = shuffle_epsilon(delta=1e-6, local_epsilon=4.0, num_users=10**5)
    assert 0.1675385583317841 - 0.5378040242374512 / 2**10 < eps <= 0.172790550755978
    # Same README: closed form 0.5378040242374512 from `closedformanalysis`, which uses the factor
    # (1 − e^{−ε0}) / (1 + e^{−ε0−ε'}) where Theorem 3.1 has (e^{ε0} − 1)/(e^{ε0} + 1); rebuilding
    # theirs from our 8√(e^{ε0} log(4/δ)/n) + 8e^{ε0}/n checks those constants.
    ours = shuffle_closed_form_epsilon(delta=1e-6, local_epsilon=4.0, num_users=10**5)
    inner = math.expm1(ours) / math.tanh(2.0)
    apple = math.log1p((1 - math.exp(-4)) / (1 + math.exp(-4 - math.log1p(inner))) * inner)
    assert apple == pytest.approx(0.5378040242374512, rel=1e-12)
    assert ours == pytest.approx(0.5346339916517077, rel=1e-12)


# --- argument validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"local_epsilon": -1, "num_users": 10}, r"^`local_epsilon` must be > 0 and finite; got -1\.$"),
        ({"local_epsilon": 0.0, "num_users": 10}, r"`local_epsilon` must be > 0 and finite; got 0\.0\."),
        ({"local_epsilon": math.inf, "num_users": 10}, r"`local_epsilon` .*; got inf\."),
        ({"local_epsilon": math.nan, "num_users": 10}, r"`local_epsilon` .*; got nan\."),
        ({"local_epsilon": 1.0, "num_users": 0}, r"^`num_users` must be an integer >= 1; got 0\.$"),
        ({"local_epsilon": 1.0, "num_users": 2.5}, r"`num_users` must be an integer >= 1; got 2\.5\."),
        ({"local_epsilon": 1.0, "num_users": True}, r"`num_users` must be an integer >= 1; got True\."),
    ],
)
def test_invalid_common_arguments_are_named(kwargs, match):
    calls = [
        lambda: shuffle_delta(epsilon=0.1, **kwargs),
        lambda: shuffle_epsilon(delta=1e-6, **kwargs),
        lambda: shuffle_rdp(orders=np.array([2.0]), **kwargs),
        lambda: shuffle_log_pmfs(**kwargs),
        lambda: shuffle_closed_form_epsilon(delta=1e-6, **kwargs),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=match):
            call()


def test_invalid_specific_arguments_are_named():
    common = {"local_epsilon": 1.0, "num_users": 100}
    with pytest.raises(ValueError, match=r"`epsilon` must be >= 0 and finite; got -0\.1\."):
        shuffle_delta(epsilon=-0.1, **common)
    for bad in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match=r"`delta` must be in \(0, 1\); got"):
            shuffle_epsilon(delta=bad, **common)
    for bad in ([1.0], [], [2.0, math.inf]):
        with pytest.raises(ValueError, match=r"`orders` must be non-empty, finite and > 1"):
            shuffle_rdp(orders=np.array(bad), **common)
    with pytest.raises(ValueError, match=r"`tail_mass` must be in \[0, 1\); got 1\.0\."):
        shuffle_log_pmfs(tail_mass=1.0, **common)
    with pytest.raises(TypeError, match=r"`local_epsilon` must be a real number"):
        shuffle_delta(epsilon=0.1, local_epsilon="1", num_users=100)


def test_closed_form_refuses_local_epsilons_outside_the_theorem():
    # log(1000 / (16 log(2e6))) = 1.46: Theorem 3.1 says nothing about ε0 = 2 with 1000 users.
    with pytest.raises(ValueError, match=r"`local_epsilon` must be <= log\(n / \(16 log\(2/δ\)\)\) = 1\.46"):
        shuffle_closed_form_epsilon(delta=1e-6, local_epsilon=2.0, num_users=1000)


def test_log_pmfs_refuse_dicts_of_tens_of_millions_of_outcomes():
    with pytest.raises(ValueError, match=r"`num_users` = 1000000 with `local_epsilon` = 1\.0 gives"):
        shuffle_log_pmfs(local_epsilon=1.0, num_users=10**6)

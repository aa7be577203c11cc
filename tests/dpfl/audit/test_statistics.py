import math

import numpy as np
import pytest
from scipy import stats

from dpfl.audit import clopper_pearson, epsilon_lower_bound, projected_trials
from dpfl.privacy.calibration import calibrate_noise_multiplier, epsilon
from dpfl.privacy.events import GaussianEvent

DELTA = 1e-5


@pytest.fixture(scope="module")
def sigma_at_epsilon_4():
    """σ of one Gaussian release (sensitivity 1) at ε = 4, δ = 1e-5, by the PLD accountant."""
    sigma = calibrate_noise_multiplier(
        lambda s: [GaussianEvent(s)], target_epsilon=4.0, target_delta=DELTA, accountant="pld"
    )
    assert sigma == pytest.approx(1.0812, rel=1e-3)  # Balle & Wang 2018's analytic Gaussian: 1.081
    return sigma


def canary_trials(std, trials, seed=0):
    v = np.linspace(-1, 1, 30)
    v_prime = v.copy()
    v_prime[3] += 1.0  # ‖v − v′‖ = 1: the sensitivity the σ was calibrated for
    return projected_trials(v, v_prime, noise_std=std, trials=trials, seed=seed)


def test_clopper_pearson_matches_the_beta_quantiles_and_the_rule_of_three():
    lower, upper = clopper_pearson(np.array([0, 7, 50]), 50, alpha=0.025)
    assert lower[0] == 0 and upper[2] == 1
    assert lower[1] == pytest.approx(stats.beta.ppf(0.025, 7, 44))
    assert upper[1] == pytest.approx(stats.beta.ppf(0.975, 8, 43))
    _, zero = clopper_pearson(np.array([0]), 1_000_000, alpha=0.05)
    assert zero[0] == pytest.approx(-math.log(0.05) / 1e6, rel=1e-4)  # the "rule of three"


def test_projected_trials_have_the_exact_means_and_std():
    a, b = projected_trials(np.array([3.0, 4.0]), np.zeros(2), noise_std=2.0, trials=200_000, seed=1)
    # u = (3, 4)/5: ⟨v_D, u⟩ = 5, ⟨v_D′, u⟩ = 0.
    assert a.mean() == pytest.approx(5.0, abs=0.02) and b.mean() == pytest.approx(0.0, abs=0.02)
    assert a.std() == pytest.approx(2.0, rel=0.01) and b.std() == pytest.approx(2.0, rel=0.01)


def test_a_sound_gaussian_release_gets_a_lower_bound_between_half_and_all_of_its_epsilon(
    sigma_at_epsilon_4,
):
    ledger = epsilon(GaussianEvent(sigma_at_epsilon_4), delta=DELTA, accountant="pld")
    bound = epsilon_lower_bound(*canary_trials(sigma_at_epsilon_4, 1_000_000), delta=DELTA)
    assert 0.5 * ledger <= bound.epsilon <= ledger
    assert bound.epsilon == pytest.approx(2.80, abs=0.25)  # measured 2.80 with seed 0 of this layout
    assert bound.trials == 500_000


def test_half_the_noise_is_caught_the_bound_exceeds_the_claimed_epsilon(sigma_at_epsilon_4):
    bound = epsilon_lower_bound(*canary_trials(sigma_at_epsilon_4 / 2, 1_000_000), delta=DELTA)
    assert bound.epsilon > 4.0
    assert bound.epsilon == pytest.approx(5.69, abs=0.3)  # the true ε at σ/2 is 9.08 (PLD)


def test_identical_releases_certify_nothing():
    a, b = projected_trials(np.ones(5), np.ones(5), noise_std=1.0, trials=100_000, seed=3)
    assert epsilon_lower_bound(a, b, delta=DELTA).epsilon < 0.1


def test_too_few_trials_or_a_bad_split_are_refused():
    with pytest.raises(ValueError, match="need ≥ 4 trials"):
        epsilon_lower_bound(np.ones(3), np.ones(3), delta=DELTA)
    with pytest.raises(ValueError, match="selection_fraction"):
        epsilon_lower_bound(np.ones(10), np.ones(10), delta=DELTA, selection_fraction=1.0)

"""Per-party calibration: each party's own smallest σ, searched once per distinct schedule."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.errors import AccountingError, SpecError
from dpfl.privacy.calibration import (
    NoiseOutOfRange,
    calibrate_noise_multiplier,
    calibrate_party_noise_multipliers,
    epsilon,
    sgd_event,
)

DELTA = 1e-5


def _schedule(plans: dict[str, tuple[float, int]], calls: list[int] | None = None):
    """Returns σ ↦ each party's events; a plan is (sampling rate, releases); σ one or one per party."""

    def make(sigma):
        if calls is not None:
            calls.append(1)
        sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (len(plans),))
        return {
            p: sgd_event(noise_multiplier=float(s), sampling_rate=q, steps=t)
            for (p, (q, t)), s in zip(plans.items(), sigmas, strict=True)
        }

    return make


def _calibrate(plans: dict[str, tuple[float, int]], target: float = 2.0, **kwargs):
    return calibrate_party_noise_multipliers(
        _schedule(plans, kwargs.pop("calls", None)),
        parties=list(plans),
        target_epsilon=target,
        target_delta=DELTA,
        **kwargs,
    )


def _eps(plan: tuple[float, int], sigma: float) -> float:
    q, t = plan
    return epsilon(sgd_event(noise_multiplier=sigma, sampling_rate=q, steps=t), delta=DELTA)


def test_every_party_meets_the_target_and_slightly_less_noise_does_not():
    plans = {"large": (0.02, 40), "medium": (0.08, 40), "small": (0.2, 40)}  # silos of 3 sizes
    sigmas = _calibrate(plans)
    assert isinstance(sigmas, np.ndarray) and sigmas.shape == (3,)
    for plan, sigma in zip(plans.values(), sigmas, strict=True):
        assert _eps(plan, sigma) <= 2.0
        assert _eps(plan, sigma * (1 - 1e-3)) > 2.0
    # A silo sampled at a lower rate (a larger silo) needs less noise.
    assert sigmas[0] < sigmas[1] < sigmas[2]
    assert sigmas[0] < 0.7 * sigmas[2]


def test_each_party_gets_what_a_search_on_it_alone_gives():
    plans = {"a": (1.0, 10), "b": (1.0, 90)}
    sigmas = _calibrate(plans)
    for (q, t), sigma in zip(plans.values(), sigmas, strict=True):
        alone = calibrate_noise_multiplier(
            lambda s, q=q, t=t: sgd_event(noise_multiplier=s, sampling_rate=q, steps=t),
            target_epsilon=2.0,
            target_delta=DELTA,
        )
        assert sigma == pytest.approx(alone, rel=2e-4)  # both within rtol = 1e-4 of the same root
    assert sigmas[1] == pytest.approx(3 * sigmas[0], rel=1e-3)  # Gaussian RDP: σ ∝ √releases


def test_identical_schedules_are_searched_once():
    two, six = [], []
    few = _calibrate({"a": (1.0, 10), "b": (1.0, 30)}, calls=two)
    many = _calibrate({f"{p}{i}": (1.0, t) for p, t in (("a", 10), ("b", 30)) for i in range(3)}, calls=six)
    np.testing.assert_array_equal(many, np.repeat(few, 3))
    assert len(six) == len(two)  # the duplicates cost no make_events call and no accounting


def test_a_homogeneous_federation_gets_one_sigma_equal_to_the_shared_calibration():
    plans = {f"silo-{i}": (0.05, 30) for i in range(5)}
    sigma = _calibrate(plans)
    shared = calibrate_noise_multiplier(
        lambda s: list(_schedule(plans)(s).values()), target_epsilon=2.0, target_delta=DELTA
    )
    assert isinstance(sigma, float)
    assert sigma == shared  # the same search from the same start: bit for bit


def test_a_listed_party_that_never_releases_gets_the_largest_sigma():
    releasing = _schedule({"a": (1.0, 10), "b": (1.0, 40)})

    def make(sigma):
        sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (3,))
        return releasing(sigmas[:2])  # "idle" never releases

    sigmas = calibrate_party_noise_multipliers(
        make, parties=["a", "b", "idle"], target_epsilon=2.0, target_delta=DELTA
    )
    assert sigmas[2] == sigmas[1] > sigmas[0]


def test_sigmas_a_schedule_refuses_count_as_not_meeting_the_target():
    releasing = _schedule({"a": (1.0, 1), "b": (1.0, 2)})

    def make(sigma):  # a mechanism with no guarantee below σ = 1
        if np.any(np.asarray(sigma) < 1.0):
            raise NoiseOutOfRange("privacy.noise_multiplier", f"must be ≥ 1; got {np.min(sigma):g}.")
        return releasing(sigma)

    sigma = calibrate_party_noise_multipliers(
        make, parties=["a", "b"], target_epsilon=20.0, target_delta=DELTA
    )
    assert 1.0 <= sigma <= 1.0 + 2e-4  # the smallest σ with a guarantee, for both
    assert _eps((1.0, 2), sigma) < 20.0


def test_parties_that_depend_on_each_others_noise_are_refused():
    releasing = _schedule({"a": (1.0, 40), "b": (1.0, 10)})

    def make(sigma):  # party a releases under b's σ: each cannot be calibrated on its own
        sigma_b = np.broadcast_to(np.asarray(sigma, dtype=float), (2,))[1]
        return releasing(sigma_b)

    with pytest.raises(AccountingError, match="depend on other parties' noise"):
        calibrate_party_noise_multipliers(make, parties=["a", "b"], target_epsilon=2.0, target_delta=DELTA)


def test_an_unreachable_target_is_explained():
    with pytest.raises(SpecError, match="`target_epsilon` 1e-06 cannot be met at δ = 1e-5"):
        _calibrate({"a": (1.0, 10**6), "b": (1.0, 10)}, target=1e-6)


def test_rtol_bounds_the_bracket():
    plans = {"a": (1.0, 10), "b": (1.0, 20)}
    sigmas = _calibrate(plans, rtol=1e-2)
    for plan, sigma in zip(plans.values(), sigmas, strict=True):
        assert _eps(plan, sigma) <= 2.0
        assert _eps(plan, sigma / (1 + 1e-2)) > 2.0


def test_twenty_five_silos_each_meet_the_target_under_the_full_accountant_and_no_less_noise_does():
    # the MNIST spec's shape: 25 silos of distinct sizes, batches of 128, 50 rounds, ε = 3
    sizes = np.random.default_rng(0).integers(1800, 3000, 25)
    plans = {f"silo-{i}": (128 / n, 50) for i, n in enumerate(sizes)}
    sigmas = _calibrate(plans, target=3.0)
    assert len(set(sigmas.tolist())) == 25
    for plan, sigma in zip(plans.values(), sigmas, strict=True):
        assert _eps(plan, sigma) <= 3.0  # `epsilon` is the whole accountant: every tracked order
        assert _eps(plan, sigma * (1 - 1e-3)) > 3.0


def test_a_repeated_calibration_is_remembered():
    plans = {"a": (0.03, 60), "b": (0.07, 60)}
    first_calls, again_calls = [], []
    first = _calibrate(plans, target=1.5, calls=first_calls)
    again = _calibrate(plans, target=1.5, calls=again_calls)
    np.testing.assert_array_equal(again, first)
    assert len(again_calls) == 2 < len(first_calls)  # the schedule at two σ: its key
    again[:] = 0  # the caller's copy: the remembered σ is untouched
    np.testing.assert_array_equal(_calibrate(plans, target=1.5), first)
    # another target, tolerance, δ or schedule is another calibration
    assert np.all(_calibrate(plans, target=3.0) < first)
    assert np.all(_calibrate(plans, target=1.5, rtol=1e-2) != first)
    longer = _calibrate({"a": (0.03, 61), "b": (0.07, 60)}, target=1.5)
    assert longer[0] > first[0] and longer[1] == pytest.approx(first[1], rel=2e-4)


def test_a_large_target_is_met_at_the_smallest_noise_too():
    # ε = 100: σ ≈ 0.35, where the RDP minimum sits at orders near 1 (the form's slider end)
    plans = {"a": (64 / 143, 20), "b": (64 / 144, 20)}
    sigmas = _calibrate(plans, target=100.0)
    for plan, sigma in zip(plans.values(), sigmas, strict=True):
        assert 0.3 < sigma < 0.4
        assert _eps(plan, sigma) <= 100.0 < _eps(plan, sigma * (1 - 1e-3))


def test_twenty_five_silos_account_the_whole_grid_about_once_each_and_each_gets_its_own_sigma(monkeypatch):
    # after the first silo, each is searched on one RDP order and checked once on the whole grid
    from dpfl.privacy.accountants import rdp_pruned

    whole = []  # accountings on the whole grid (the integer orders' first pass is cheap)
    pruned = rdp_pruned.pruned_epsilon

    def counted(event, **kwargs):
        whole.extend([1] if any(a != int(a) for a in kwargs["orders"]) else [])
        return pruned(event, **kwargs)

    monkeypatch.setattr(rdp_pruned, "pruned_epsilon", counted)
    sizes = np.random.default_rng(1).integers(1800, 3000, 25)
    plans = {f"silo-{i}": (128 / n, 50) for i, n in enumerate(sizes)}
    sigmas = _calibrate(plans, target=3.0)
    assert len(whole) <= 50  # 124 when every step of every search accounted the whole grid
    for (q, t), sigma in zip(plans.values(), sigmas, strict=True):
        alone = calibrate_noise_multiplier(
            lambda s, q=q, t=t: sgd_event(noise_multiplier=s, sampling_rate=q, steps=t),
            target_epsilon=3.0,
            target_delta=DELTA,
        )
        assert alone / (1 + 1e-4) <= sigma <= alone * (1 + 1.1e-3)  # both brackets: 1e-4, 1e-3

"""Calibration meets the target and is the smallest σ that does (to 1e-3)."""

from __future__ import annotations

import pytest

from dpfl.errors import SpecError
from dpfl.privacy.calibration import calibrate_noise_multiplier, epsilon, remembered, sgd_event, walk
from dpfl.privacy.calibration import target as calibration_target
from dpfl.privacy.events import (
    GaussianEvent,
    GroupEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)


@pytest.mark.parametrize(
    ("target", "steps", "q", "accountant"),
    [(3.0, 100, 0.1, "rdp"), (3.0, 100, 0.1, "pld"), (1.0, 1000, 0.01, "rdp"), (8.0, 50, 1.0, "gdp")],
)
def test_result_meets_target_and_slightly_less_noise_does_not(target, steps, q, accountant):
    def schedule(sigma):
        return sgd_event(noise_multiplier=sigma, sampling_rate=q, steps=steps)

    sigma = calibrate_noise_multiplier(
        schedule, target_epsilon=target, target_delta=1e-5, accountant=accountant
    )
    assert epsilon(schedule(sigma), delta=1e-5, accountant=accountant) <= target
    assert epsilon(schedule(sigma * (1 - 1e-3)), delta=1e-5, accountant=accountant) > target


def test_known_value_round_trips():
    # σ = 5 for 100 steps gives 10.726 (reference/004_uldp_fl.md §3.4); calibrating for it gives σ ≈ 5 back.
    sigma = calibrate_noise_multiplier(
        lambda s: SelfComposedEvent(GaussianEvent(s), 100), target_epsilon=10.7255, target_delta=1e-5
    )
    assert sigma == pytest.approx(5.0, rel=1e-3)


def test_worst_party_decides():
    # Two silos of different sizes: the smaller one (larger q) needs more noise.
    def parties(sigma):
        return [SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), 50) for q in (0.05, 0.2)]

    sigma = calibrate_noise_multiplier(parties, target_epsilon=2.0, target_delta=1e-5)
    worst = calibrate_noise_multiplier(lambda s: parties(s)[1], target_epsilon=2.0, target_delta=1e-5)
    assert sigma == pytest.approx(worst)


def test_unreachable_target_is_explained():
    with pytest.raises(SpecError, match="`target_epsilon` 1e-06 cannot be met at δ = 1e-5"):
        calibrate_noise_multiplier(
            lambda s: SelfComposedEvent(GaussianEvent(s), 10**6), target_epsilon=1e-6, target_delta=1e-5
        )


def test_pld_calibration_below_its_noise_floor_is_refused_naming_epsilon():
    # a huge target is met only at σ below pld's bounded-cost floor: refused, never evaluated there
    with pytest.raises(SpecError, match=r"below 0\.3") as info:
        calibrate_noise_multiplier(
            lambda s: sgd_event(noise_multiplier=s, sampling_rate=0.2, steps=5),
            target_epsilon=1e4,
            target_delta=1e-5,
            accountant="pld",
        )
    assert info.value.field == "privacy.epsilon"


@pytest.mark.parametrize(("group_size", "target"), [(8, 3.0), (3, 1.0), (2, 8.0)])
def test_group_privacy_is_searched_on_walked_orders_and_accounted_on_the_whole_grid_once(
    monkeypatch, group_size, target
):
    # ULDP-GROUP's round: two silos' DP-SGD in parallel, group privacy for k records per user
    def schedule(sigma):
        silos = (
            sgd_event(noise_multiplier=sigma, sampling_rate=0.05, steps=40),
            sgd_event(noise_multiplier=sigma, sampling_rate=0.02, steps=100),
        )
        return SelfComposedEvent(GroupEvent(ParallelEvent(silos), group_size), 20)

    whole = []  # the whole accountant's ε (each computes hundreds of orders at 2^c times theirs)
    monkeypatch.setattr(calibration_target, "epsilon", lambda *a, **k: whole.append(1) or epsilon(*a, **k))
    sigma = calibrate_noise_multiplier(schedule, target_epsilon=target, target_delta=1e-5)
    assert len(whole) == 1  # the check at σ/(1 + 1e-3); σ itself met on a walked order
    assert epsilon(schedule(sigma), delta=1e-5) <= target < epsilon(schedule(sigma * (1 - 1e-3)), delta=1e-5)
    remembered.RESULTS.clear()  # the same schedule again, searched on the whole grid
    whole.clear()
    monkeypatch.setattr(walk.Walk, "of", classmethod(lambda cls, *a: None))
    grid = calibrate_noise_multiplier(schedule, target_epsilon=target, target_delta=1e-5)
    assert len(whole) >= 5  # every step of the search on the whole grid
    assert grid / (1 + 1e-4) <= sigma <= grid * (1 + 1.1e-3)

"""The audit of `sdp_mbsgd`'s local randomizer: tight at its ε₀, and a randomizer spending more is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfl.audit.local import local_randomizer_audit
from dpfl.audit.statistics import epsilon_lower_bound
from dpfl.errors import SpecError
from dpfl.runner import prepare
from dpfl.spec import parse_spec

SPEC = {
    "algorithm": "sdp_mbsgd",
    "dataset": {"name": "digits", "silos": 3},
    "model": {"name": "logreg"},
    "rounds": 1,
    "privacy": {"noise_multiplier": 0.5, "delta": 1e-5},
}


def lower(found: dict) -> float:
    """The 95 % lower bound on ε₀ from the audit's trials."""
    return epsilon_lower_bound(*found["statistics"], delta=found["delta"]).epsilon


def test_the_l2_ball_randomizer_is_audited_close_to_its_epsilon_0():
    # ε₀ = 2: the sign of ⟨z, u⟩ is right with probability e²/(1 + e²) = 0.881, a likelihood ratio of e².
    found = local_randomizer_audit(prepare(parse_spec(SPEC)), 0.5, trials=200_000)
    assert found["epsilon_ledger"] == 2.0
    assert 0.9 * 2.0 <= lower(found) <= 2.0
    assert found["max_sensitivity_ratio"] is None


def test_a_randomizer_with_less_noise_than_claimed_is_caught():
    algorithm = prepare(parse_spec(SPEC))
    randomize = algorithm.randomize

    def planted(grads, mask, silos, r):  # the bug: ε₀ doubled inside, the claim unchanged
        claimed = algorithm.sigmas
        algorithm.sigmas = claimed / 2
        try:
            return randomize(grads, mask, silos, r)
        finally:
            algorithm.sigmas = claimed

    algorithm.randomize = planted
    found = local_randomizer_audit(algorithm, 0.5, trials=200_000)
    assert found["epsilon_ledger"] == 2.0 and lower(found) > 2.0
    assert lower(found) <= 4.0 + 1e-9 and math.isfinite(lower(found))


def test_the_binomial_protocol_is_refused_with_the_reason():
    spec = parse_spec(
        SPEC
        | {"params": {"randomizer": "binomial"}, "privacy": {"noise_multiplier": 0.5, "accountant": "pld"}}
    )
    with pytest.raises(SpecError, match="whole round's sum") as err:
        local_randomizer_audit(prepare(spec), np.float64(0.5), trials=1_000)
    assert err.value.field == "params.randomizer"

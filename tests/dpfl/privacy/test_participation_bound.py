"""A protected run's reservation bounds every participation draw it can make from its secret key
(issue 39, measurement 6: a budget set to the public draw's projection was overspent)."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.projection import project
from dpfl.runner import prepare
from tests.factories import isrl_digits_spec


@pytest.mark.parametrize("participation", [2, 5])
def test_the_bound_is_at_least_every_draws_plan(participation):
    spec = isrl_digits_spec(
        participation=participation, rounds=8, privacy={"noise_multiplier": 1.5, "delta": 1e-5}
    )
    algorithm = prepare(spec)
    privacy = project(algorithm, source="entropy")
    draws = []
    for key in np.random.default_rng(7).integers(0, 2**62, size=30):
        algorithm.noise_key = int(key)
        curve = algorithm.plan(1.5).epsilon_by_round(delta=1e-5, accountant="rdp")
        draws.append(float(curve[-1]))
    assert max(draws) <= privacy.bound_epsilon * (1 + 1e-12)
    assert min(draws) < privacy.bound_epsilon  # a real bound above draws, not one of them by chance
    seeded = project(prepare(spec), source="seeded")
    assert seeded.bound_epsilon == seeded.planned_epsilon[-1]  # a simulation run's draw is the spec's

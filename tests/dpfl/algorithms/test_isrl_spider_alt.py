"""ISRL-DP Fed-SPIDER, the paper's Alg. 11: two messages per silo per round, 2R − 1 in the ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfl.engine import tap
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import ComposedEvent, GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpfl.runner import prepare, run
from dpfl.spec import parse_spec
from tests.factories import isrl_digits_spec

PARAMS = {"lr": 0.5, "batch_size": 64, "clip": 1.0}
DELTA = 1e-5


def spec(**changes):
    return isrl_digits_spec(**({"rounds": 6, "params": PARAMS, "algorithm": "isrl_spider_alt"} | changes))


def test_the_plan_has_two_r_minus_one_releases_per_silo_and_the_run_makes_them():
    algorithm = prepare(spec())
    plan = algorithm.plan(1.3)
    parties = plan.party_events()
    assert len(parties) == algorithm.spec.dataset.silos
    for silo, rate in enumerate(algorithm.rates):
        event = PoissonSampledEvent(float(rate), GaussianEvent(1.3))
        assert parties[f"silo-{silo}"] == ComposedEvent((SelfComposedEvent(event, 2 * 6 - 1),))
    result = run(spec(privacy={"noise_multiplier": 1.3, "delta": DELTA}))
    assert result.ledger.to_json() == plan.to_json()
    per_round = [sum(e.round == r and e.party == "silo-0" for e in result.ledger.entries) for r in (1, 2, 6)]
    assert per_round == [1, 2, 2]  # one message in round 1, then a difference and a fresh gradient


def test_its_epsilon_is_that_of_all_its_releases_and_calibration_meets_the_target():
    by_sigma = run(spec(privacy={"noise_multiplier": 1.3, "delta": DELTA}))
    q = float(prepare(spec()).rates.max())  # the least private silo samples at the highest rate
    accountant = make_accountant("rdp")
    accountant.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.3)), 11))
    assert by_sigma.epsilon == pytest.approx(accountant.epsilon(DELTA), rel=1e-9)
    mbsgd = run(spec(algorithm="isrl_mbsgd", privacy={"noise_multiplier": 1.3, "delta": DELTA}))
    assert by_sigma.epsilon > 1.3 * mbsgd.epsilon  # 11 releases against 6
    calibrated = run(spec(privacy={"epsilon": 3.0, "delta": DELTA}))
    assert calibrated.epsilon == pytest.approx(3.0, rel=1e-3) and calibrated.epsilon <= 3.0 * (1 + 1e-9)


def test_the_papers_sigma_is_mbsgds_and_the_ledger_shows_what_it_spends():
    paper = {"epsilon": 3.0, "delta": DELTA, "calibration": "paper"}
    alt, mbsgd = run(spec(privacy=paper)), run(spec(algorithm="isrl_mbsgd", privacy=paper))
    assert alt.privacy.noise_multiplier == mbsgd.privacy.noise_multiplier  # calibrated for R releases
    assert alt.epsilon > mbsgd.epsilon  # but it makes 2R − 1


def test_each_round_sends_a_difference_at_twice_the_noise_then_a_fresh_gradient():
    algorithm = prepare(spec(rounds=3))
    algorithm.setup(1.3)
    with tap() as releases:
        for r in (1, 2, 3):
            algorithm.round(r)
    assert [x.round for x in releases] == [1, 2, 3, 4, 5]  # message indices 1 … 2R − 1
    stds = [float(np.unique(x.std)[0]) for x in releases]
    assert stds == pytest.approx([1.3, 2.6, 1.3, 2.6, 1.3])  # σC, then 2σC for a difference


def test_it_learns_digits():
    result = run(spec(rounds=20, privacy={"epsilon": 8.0, "delta": DELTA}))
    assert result.final.accuracy >= 0.6
    assert math.isfinite(result.epsilon)


def test_its_json_name_is_accepted():
    assert parse_spec({"algorithm": "isrl_spider_alt"}).algorithm == "isrl_spider_alt"

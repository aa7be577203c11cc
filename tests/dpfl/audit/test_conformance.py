"""Conformance of every private algorithm with what the auditor, the accountant and a reader assume.

Parametrised over the registry: a private algorithm registered without a case here fails, and
one the auditor cannot cover yet must say why in `dpfl.audit.fuzz.NOT_COVERED` (then it is
skipped with that reason, visibly). Per algorithm, on a small spec (digits with a linear model,
or 400 synthetic logistic records for the GDP family):

- soundness: the fuzzer's worst ratio ≤ 1 + 1e-6 and the statistical lower bound ≤ the ledger's
  ε of the one release (`audit_first_round`, 2·10⁵ trials: power is the benchmark's business,
  benchmarks/audit.py);
- plan = releases: the ledger `runner.run` records equals `algorithm.plan(σ)` entry by entry,
  so the ε shown before a run is the ε of what it released;
- reproducibility: two runs of one spec give the same ledger, accuracy and final model.
"""

import numpy as np
import pytest
import torch

from dpfl import runner
from dpfl.algorithms import algorithm_class, registered_algorithms
from dpfl.audit.fuzz import COVERAGE, NOT_COVERED, TOLERANCE
from dpfl.audit.local import LOCAL_COVERAGE
from dpfl.audit.rounds import audit_first_round
from dpfl.spec import parse_spec
from tests.factories import data_dir

DIGITS = {"name": "digits", "silos": 3}
DIGITS_USERS = DIGITS | {"users": {"kind": "uniform", "count": 20}}
LOGISTIC = {"name": "logistic", "silos": 3, "options": {"num_samples": 400, "num_test": 100}}
VOTES = {"public_pool": 40, "queries": 8, "student_epochs": 1}
TRIALS = 200_000

# algorithm → (dataset, params, the worst ratio measured over its notion's neighbours)
CASES = {
    "isrl_mbsgd": (DIGITS, {}, 1.0),  # the huge canary's clipped gradient: exactly C
    "isrl_proxsgd": (DIGITS, {}, 1.0),
    "isrl_spider": (DIGITS, {}, 1.0),
    "isrl_spider_alt": (DIGITS, {}, 1.0),
    "isrl_localsgd": (DIGITS, {"local_steps": 2}, 1.0),
    "dp_fedsgd": (DIGITS, {}, 1.0),
    "dp_fedavg": (DIGITS, {"local_steps": 3}, 1.0),  # a canary agent: its clipped update is S
    # A canary user flips both silos' clipped deltas: ≈ 2|S|C, the noise's sensitivity.
    "uldp_naive": ({"name": "digits", "silos": 2}, {}, 0.9999),
    "uldp_sgd": (DIGITS_USERS, {}, 1.0),  # a canary user: C in total weight 1
    "uldp_avg": (DIGITS_USERS, {"local_epochs": 1}, 1.0),
    "uldp_avg_w": (DIGITS_USERS, {"local_epochs": 1}, 1.0),
    # Group privacy for k = 2: the planted user's 2 kept records lie in 2 silos, C each of 2C.
    "uldp_group": (DIGITS_USERS, {"group_size": 2}, 0.5),
    # Opposite gradients of norm R (angle π − 0.04) at a model where both saturate: 2Γ/s·cos 0.02.
    "gdp_gd": (LOGISTIC, {}, 0.9998),
    "gdp_localnewton": (LOGISTIC, {}, 0.9998),
    # The summed histogram before the argmax, per query: an agent removed moves it by 1
    # (AE, agent level); a record placed on a public query evicts a k-th neighbour: √2/k (kNN).
    "ae_dpfl": (DIGITS, VOTES | {"local_epochs": 2}, 1.0),
    "knn_dpfl": (DIGITS, VOTES | {"k": 5, "features": "raw"}, 1.0),
    # AE-DPFL+DA: the same vote, from local models adapted to the public pool (an MLP: see MODELS)
    "ae_dpfl_da": (DIGITS, VOTES | {"local_epochs": 2, "domain_hidden": 4}, 1.0),
    # A local randomizer: no sensitivity ratio, its ε₀ is tested on its messages (audit/local.py).
    "sdp_mbsgd": (DIGITS, {}, None),
}

# Every case trains a linear model but those that need features below the last layer.
MODELS = {"ae_dpfl_da": {"name": "mlp", "hidden": [8]}}

PRIVATE = sorted(n for n in registered_algorithms() if algorithm_class(n).notion != "none")


def spec_of(name, rounds=2, **params):
    dataset, base, _ = CASES[name]
    return parse_spec(
        {
            "algorithm": name,
            "params": base | params,
            "dataset": dataset,
            "model": MODELS.get(name, {"name": "logreg"}),
            "rounds": rounds,
            "seed": 3,
            "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
        }
    )


def covered(name):
    if name in NOT_COVERED:
        pytest.skip(f"not audited yet: {NOT_COVERED[name]}")
    assert name in CASES, f"{name} is private but has no conformance case; add it to CASES (and COVERAGE)"
    assert name in COVERAGE or name in LOCAL_COVERAGE


def test_the_cases_are_exactly_the_covered_algorithms():
    assert set(CASES) == set(COVERAGE) | LOCAL_COVERAGE
    assert set(PRIVATE) == set(COVERAGE) | LOCAL_COVERAGE | set(NOT_COVERED)


@pytest.mark.parametrize("name", PRIVATE)
def test_round_one_is_sound_by_fuzzing_and_by_trials(name):
    covered(name)
    audits = audit_first_round(spec_of(name), data_dirs=[data_dir()], trials=TRIALS)
    assert audits
    if CASES[name][2] is None:  # a local randomizer
        assert all(a.max_sensitivity_ratio is None for a in audits)
    else:
        assert max(a.max_sensitivity_ratio for a in audits) == pytest.approx(CASES[name][2], abs=2e-3)
    for a in audits:
        assert a.max_sensitivity_ratio is None or a.max_sensitivity_ratio <= 1 + TOLERANCE
        assert 0 <= a.epsilon_lower <= a.epsilon_ledger
        assert a.trials == TRIALS and a.sound


@pytest.mark.parametrize("name", PRIVATE)
def test_the_plan_is_what_the_run_releases(name):
    covered(name)
    spec = spec_of(name)
    result = runner.run(spec, data_dirs=[data_dir()])
    sigma = result.privacy.noise_multiplier
    plan = runner.prepare(spec, data_dirs=[data_dir()]).plan(
        np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma
    )
    assert result.ledger.rounds == [1, 2]
    # Entry by entry, in the public form: a vote's noiseless histogram is recorded only by the
    # run (for the data-dependent bound) and withheld from every public ledger.
    assert result.ledger.to_json() == plan.to_json()
    assert [(e.round, e.party) for e in result.ledger.entries] == [(e.round, e.party) for e in plan.entries]
    eps = result.epsilon
    assert eps == pytest.approx(plan.epsilon(delta=1e-5, accountant=result.privacy.accountant), rel=1e-12)


@pytest.mark.parametrize("name", PRIVATE)
def test_one_seed_gives_one_run(name):
    covered(name)
    first, second = (runner.run(spec_of(name), data_dirs=[data_dir()]) for _ in range(2))
    assert first.ledger.entries == second.ledger.entries
    assert first.final.accuracy == second.final.accuracy
    assert torch.equal(first.final_params, second.final_params)


def first_round(spec, key: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the global model before and after round 1 of `spec` with its mechanisms keyed by `key`."""
    algorithm = runner.prepare(spec, data_dirs=[data_dir()])
    algorithm.noise_key = key
    sigma = runner.project(algorithm).noise_multiplier
    algorithm.setup(np.asarray(sigma, dtype=float) if isinstance(sigma, list) else sigma)
    before = algorithm.global_params.clone()
    type(algorithm).round_many([algorithm], 1)
    return before, algorithm.global_params.clone()


@pytest.mark.parametrize("name", PRIVATE)
def test_public_choices_come_from_the_seed_and_mechanism_draws_from_the_noise_key(name):
    """A protected run keys its mechanisms by a secret (`Algorithm.noise_key`) and keeps the spec's
    public choices: a draw of noise from the public seed would make two keys release the same
    model, and a public choice drawn from the key would start them from different ones."""
    covered(name)
    spec = spec_of(name, rounds=1)
    seeded, simulated = first_round(spec, spec.seed), runner.run(spec, data_dirs=[data_dir()])
    assert torch.equal(seeded[1], simulated.final_params)  # simulation: the key is the spec's seed
    secret = first_round(spec, 2**127 + 12345)
    assert torch.equal(secret[0], seeded[0])  # the same public start
    assert not torch.equal(secret[1], seeded[1])  # other noise, sampling and participation


@pytest.mark.parametrize(
    ("name", "level", "claimed"),
    [("ae_dpfl", "instance", 2**0.5), ("knn_dpfl", "agent", 1.0)],
)
def test_the_other_voting_level_is_sound_and_tight(name, level, claimed):
    """AE at instance level: a record flips one agent's label, √2; kNN at agent level: 1."""
    audits = audit_first_round(spec_of(name, level=level), data_dirs=[data_dir()], trials=TRIALS)
    (a,) = audits
    assert a.claimed_sensitivity == pytest.approx(claimed)
    assert a.max_sensitivity_ratio == pytest.approx(1.0, abs=1e-9)
    assert 0 < a.epsilon_lower <= a.epsilon_ledger and a.sound

"""Batched runs: which specs train together, and that a batch gives each run its numbers alone.

Runs of one batch key differ only in privacy target, noise multiplier and seed. Trained together
(`runner.train` of several started runs, one `round_many` per round), each must get the ledger,
ε, accuracy and model it gets when run by itself, up to float32 summation order.
"""

import math

import pytest
import torch

from dpfl import runner
from dpfl.algorithms import Algorithm, algorithm_class, registered_algorithms
from dpfl.batching import batch_key, batches
from dpfl.spec import parse_spec

DIGITS = {"name": "digits", "silos": 4, "partition": {"kind": "dirichlet", "alpha": 0.5}}
BASE = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 1.0, "batch_size": 32},
    "dataset": DIGITS,
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 12,
    "eval_every": 4,
    "privacy": {"epsilon": 2.0, "delta": 1e-5},
}
BATCHED = sorted(n for n in registered_algorithms() if algorithm_class(n).batched)


def spec(**changes):
    return parse_spec(BASE | changes)


# DP-FedAvg samples agents at rate q: half of the 4 agents a round, 3 local steps each; the
# user-level methods need users (zipf: a seed draws who owns what, so the runs' groups differ)
USERS = DIGITS | {"users": {"kind": "zipf", "count": 20}}
OWN = {
    "isrl_localsgd": {"params": {"lr": 0.5, "batch_size": 16, "local_steps": 3}},
    "isrl_spider": {"params": {"lr": 0.5, "batch_size": 32, "phase": 3}},  # phase starts and differences
    "dp_fedavg": {"params": {"lr": 0.5, "batch_size": 16, "sample_rate": 0.5, "local_steps": 3}},
    "uldp_avg": {"params": {"local_lr": 0.05, "local_epochs": 2, "batch_size": 8}, "dataset": USERS},
    "uldp_sgd": {"params": {"global_lr": 5.0}, "dataset": USERS},
}
CASES = [(name, OWN.get(name, {})) for name in BATCHED] + [
    ("dp_fedavg", {"params": OWN["dp_fedavg"]["params"] | {"adaptive_clip": True, "count_noise": 10.0}}),
    ("uldp_avg", {"params": {"user_sampling_rate": 0.5, "weighting": "records"}, "dataset": USERS}),
]


def variants(algorithm: str, own: dict | None = None) -> list:
    """Returns four specs of one batch key: two targets, a given σ, and two seeds."""
    own = {"algorithm": algorithm, "params": BASE["params"]} | (own or {})
    return [
        spec(**own, seed=0),
        spec(**own, seed=1, privacy={"epsilon": 8.0, "delta": 1e-5}),
        spec(**own, seed=2, privacy={"noise_multiplier": 1.3, "delta": 1e-5}),
        spec(**own, seed=1),
    ]


def test_the_families_that_batch():
    assert BATCHED == [
        "dp_fedavg", "dp_fedsgd", "isrl_localsgd", "isrl_mbsgd", "isrl_proxsgd", "isrl_spider",
        "isrl_spider_alt", "uldp_avg", "uldp_sgd",
    ]  # fmt: skip


@pytest.mark.parametrize("name", registered_algorithms())
def test_a_batched_class_computes_its_round_where_it_batches_it(name):
    """A subclass that changes `round` but inherits a vectorised `round_many` would batch a round
    that is not its own: it must say `batched = False` (or vectorise its own)."""
    cls = algorithm_class(name)
    if not cls.batched:
        return
    owner = next(c for c in cls.__mro__ if "round_many" in vars(c))
    assert "round" in vars(owner) or not any(
        "round" in vars(c) for c in cls.__mro__[: cls.__mro__.index(owner)]
    )
    assert owner is not Algorithm


def test_specs_that_differ_only_in_target_sigma_or_seed_share_a_key():
    keys = {batch_key(s) for s in variants("isrl_mbsgd")}
    assert len(keys) == 1 and None not in keys
    assert batch_key(spec(params={"lr": 0.5, "batch_size": 32})) not in keys
    assert batch_key(spec(rounds=13)) not in keys
    assert batch_key(spec(privacy={"epsilon": 2.0, "delta": 1e-6})) not in keys
    assert batch_key(spec(algorithm="isrl_proxsgd")) not in keys


def test_an_algorithm_that_does_not_batch_has_no_key():
    assert batch_key(spec(algorithm="sdp_mbsgd")) is None


def test_batches_split_a_key_evenly_and_keep_keyless_specs_alone():
    a = [spec(seed=s) for s in range(10)]
    lone = spec(algorithm="sdp_mbsgd")
    other = spec(params={"lr": 0.5, "batch_size": 32})
    groups = batches([a[0], lone, *a[1:], other, lone], max_runs=4)
    # ten runs of one key, at most four a batch: three batches of 4, 3 and 3, in order of appearance
    assert groups == [[0, 2, 3, 4], [5, 6, 7], [8, 9, 10], [1], [11], [12]]
    assert batches(a, max_runs=8) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert batches(a[:8], max_runs=8) == [list(range(8))]
    with pytest.raises(ValueError, match="max_runs must be ≥ 1"):
        batches(a, max_runs=0)


@pytest.mark.parametrize(("name", "own"), CASES)
def test_a_batch_gives_each_run_what_it_gets_alone(name, own):
    specs = variants(name, own)
    alone = [runner.run(s) for s in specs]
    together = runner.run_batch(specs)
    for a, b in zip(alone, together, strict=True):
        assert b.ledger.to_json() == a.ledger.to_json()
        assert b.epsilon == a.epsilon
        assert [r.round for r in b.rounds] == [4, 8, 12]
        assert [r.accuracy for r in b.rounds] == [r.accuracy for r in a.rounds]
        assert [r.epsilon for r in b.rounds] == [r.epsilon for r in a.rounds]
        torch.testing.assert_close(b.final_params, a.final_params, rtol=1e-5, atol=1e-6)
        assert b.timings["batch_runs"] == 4 and a.timings["batch_runs"] == 1
    # the runs really differ: their σ, and so their models
    assert len({str(r.privacy.noise_multiplier) for r in together[:3]}) == 3
    assert not torch.equal(together[0].final_params, together[3].final_params)
    assert math.isclose(together[1].epsilon, 8.0, rel_tol=1e-3)


def test_stopping_one_run_of_a_batch_stops_it_alone():
    specs = variants("isrl_mbsgd")[:3]
    started = [runner.start(s) for s in specs]
    heard: list[list[int]] = [[], [], []]
    ended: list[tuple[int, int]] = []  # (run, rounds run 0 had heard when it ended)
    results = runner.train(
        started,
        on_round=[lambda p, i=i: heard[i].append(p.round) for i in range(3)],
        should_stop=[None, lambda: len(heard[1]) >= 5, None],
        on_end=lambda i, result: ended.append((i, len(heard[0]))),
    )
    assert [r.stopped for r in results] == [False, True, False]
    assert ended == [(1, 5), (0, 12), (2, 12)]  # the stopped run's result comes at once
    assert heard[1] == [1, 2, 3, 4, 5] and heard[0] == heard[2] == list(range(1, 13))
    assert results[1].ledger.rounds == [1, 2, 3, 4, 5]
    alone = runner.run(specs[2])
    assert [r.accuracy for r in results[2].rounds] == [r.accuracy for r in alone.rounds]


def test_runs_of_different_keys_are_refused_together():
    started = [runner.start(spec(seed=0)), runner.start(spec(params={"lr": 0.5, "batch_size": 32}))]
    with pytest.raises(ValueError, match="share one batch key"):
        runner.train(started)

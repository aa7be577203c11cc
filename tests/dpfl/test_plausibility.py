"""Settings that run and mislead, said before the run (`dpfl.plausibility`), on real data."""

from __future__ import annotations

from dpfl import runner
from dpfl.plausibility import implausible
from dpfl.spec import parse_spec

BASE = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 10},
    "model": {"name": "mlp", "hidden": [8]},
    "rounds": 2,
    "privacy": {"epsilon": 3.0, "delta": 1e-5},
}


def said(**changes) -> list[str]:
    return implausible(runner.prepare(parse_spec(BASE | changes)))


def test_a_plausible_spec_says_nothing():
    assert said() == []


def test_a_delta_at_least_one_over_n_names_n_and_a_delta_below_it():
    # digits: 1,438 training records
    assert said(privacy={"epsilon": 3.0, "delta": 0.5}) == [
        "δ = 0.5 is at least 1/n = 1/1,438 (n: the training records): a mechanism that publishes one "
        "record outright with probability δ meets it; take δ well below 1/n, e.g. 1e-05"
    ]
    assert said(privacy={"epsilon": 3.0, "delta": 1 / 1438}) != []
    assert said(privacy={"epsilon": 3.0, "delta": 1 / 1439}) == []


def test_more_users_than_records_is_said_and_delta_counts_the_users_who_hold_records():
    spec = {
        "algorithm": "uldp_avg",
        "dataset": {"name": "digits", "silos": 10, "users": {"kind": "uniform", "count": 100_000}},
    }
    assert said(**spec) == [
        "100,000 users for 1,438 training records: most users hold no record, so a user-level ε "
        "protects people the data does not have; allocate at most as many users as records"
    ]
    few = {
        "algorithm": "uldp_avg",
        "dataset": {"name": "digits", "silos": 10, "users": {"kind": "uniform", "count": 50}},
    }
    assert said(**few, privacy={"epsilon": 3.0, "delta": 0.05})[0].startswith(
        "δ = 0.05 is at least 1/n = 1/50 (n: the users): a mechanism that publishes one user outright"
    )


def test_an_expected_batch_under_one_agent_is_said():
    assert said(algorithm="dp_fedavg", params={"sample_rate": 0.001}) == [
        "sample_rate 0.001 × 10 agents = 0.01 agents expected per round: most rounds release the "
        "noise alone; raise sample_rate or the agents"
    ]
    assert said(algorithm="dp_fedavg", params={"sample_rate": 0.1}) == []

"""A known-slow setting gets a warning before submit (issue 38): the preview names the cost."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.service

USERS = {"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 30}}


def declared(client, spec) -> list[str]:
    """Returns the preview's warnings but the one a loaded machine adds (a projection over 5 s)."""
    res = client.post("/api/privacy/project", json=spec)
    assert res.status_code == 200, res.text
    return [w for w in res.json()["warnings"] if not w.startswith("projecting this spec took")]


def test_the_weighting_protocol_is_said_to_be_slow_before_submit(client):
    spec = {
        "algorithm": "uldp_avg_w",
        "params": {"secure_weighting": True},
        "dataset": USERS,
        "model": {"name": "logreg"},
        "rounds": 2,
        "privacy": {"noise_multiplier": 2.0},
    }
    assert declared(client, spec) == [
        "the private weighting protocol computes Paillier exponentiations for every silo, user and "
        "model coordinate in every round: 30 users on 4 silos with logreg on digits (650 coordinates) "
        "took 45 s a round on 2 cores; this run has 4 silos and 30 users over 2 rounds"
    ]
    assert declared(client, spec | {"params": {}}) == []


def test_a_large_group_is_said_to_be_slow_to_calibrate(client):
    spec = {
        "algorithm": "uldp_group",
        "params": {"group_size": 16},
        "dataset": USERS,
        "model": {"name": "logreg"},
        "rounds": 1,
        "privacy": {"noise_multiplier": 50.0},  # σ given: nothing to calibrate, nothing to warn of
    }
    assert declared(client, spec) == []
    spec["privacy"] = {"epsilon": 3.0}
    (warning,) = declared(client, spec)
    assert warning.startswith("group privacy for k = 16 accounts RDP at orders up to 2^4 times larger")

"""The black-box trials (issue 39, measurement 8): planted bugs the first-round audit cannot see,
proven by running the real release path end to end; no violation on the correct mechanism.

The bugs are a plugin (tests/planted_bugs.py), audited in a child process the way a user's own
algorithm is: `DPFL_PLUGINS` names it, so this process's registry stays as shipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpfl.audit.blackbox import STATISTICS, Profile, statistics_of
from dpfl.privacy.events import GaussianEvent
from tests.factories import data_dir

ROOT = Path(__file__).resolve().parents[3]
SPEC = {
    "params": {"lr": 0.5, "batch_size": 5000, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 1},
    "model": {"name": "logreg"},
    "rounds": 2,
    "seed": 3,
    "privacy": {"noise_multiplier": 0.5, "delta": 1e-5},
}
# the bugs the first-round audit misses (its trials are drawn from the std the code reports, of
# round 1 only, with sampling fixed), each with the statistic that proves it and the black-box
# trials that prove it here: 400 where 300 already showed an excess of 0.36 or more, 1,000 for the
# two whose excess is small (300 trials: 0.10 for a doubled rate, none for a ledger skipping rounds)
MISSED_BY_ROUND_ONE = {
    "bug_half_noise_after": ("composed", 400),
    "bug_noise_outside": ("composed", 400),
    "bug_clip_round_one": (None, 400),  # any: its round 2 is unclipped
    "bug_double_rate": ("composed", 1000),
    "bug_same_noise": ("replay", 400),
    "bug_public_seed": (None, 400),  # any: its noise is the same in every run
    "bug_ledger_skips_even": ("composed", 1000),
}

AUDIT = """
import json, sys
from dpfl.audit.rounds import audit_black_box, audit_first_round
from dpfl.spec import parse_spec
spec = parse_spec(json.loads(sys.argv[1]))
first = [a.verdict for a in audit_first_round(spec, data_dirs=[sys.argv[2]], trials=20_000)]
black = audit_black_box(spec, data_dirs=[sys.argv[2]], trials=int(sys.argv[3]))
print(json.dumps({"first": first, "black": black.to_json()}))
"""


def _audit(spec: dict, trials: int = 1000) -> dict:
    """Returns the first-round verdicts and the black-box audit of `spec` with `trials`, with the
    bugs loaded."""
    env = {**os.environ, "DPFL_PLUGINS": "tests.planted_bugs", "DPFL_DATA_DIR": str(data_dir())}
    done = subprocess.run(
        [sys.executable, "-c", AUDIT, json.dumps(spec), str(data_dir()), str(trials)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("bug", list(MISSED_BY_ROUND_ONE))
def test_black_box_trials_prove_a_bug_the_first_round_audit_misses(bug):
    statistic, trials = MISSED_BY_ROUND_ONE[bug]
    params = SPEC["params"] | ({"batch_size": 700} if bug == "bug_double_rate" else {})
    found = _audit(SPEC | {"algorithm": bug, "params": params}, trials)
    assert found["first"] == ["no violation found"]
    black = found["black"]
    assert (black["verdict"], black["release"], black["rounds"], black["trials"], black["confidence"]) == (
        "violation", "silo-0", 2, trials, 0.99,
    )  # fmt: skip
    assert black["excess"] > 0 and black["neighbours"].startswith("silo 0: a Dirac canary on feature 0")
    assert statistic in (None, black["statistic"])


@pytest.mark.slow
def test_black_box_trials_pass_the_correct_algorithm():
    black = _audit(SPEC | {"algorithm": "isrl_mbsgd"})["black"]
    assert black["verdict"] == "no violation found" and black["excess"] < 0
    assert 0 < black["epsilon_lower"] < black["epsilon_ledger"] and black["statistic"] in STATISTICS


@pytest.mark.slow
def test_dpfl_audit_on_a_planted_bug_plugin_says_violation(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC | {"algorithm": "bug_public_seed"}))
    env = {**os.environ, "DPFL_PLUGINS": "tests.planted_bugs", "DPFL_DATA_DIR": str(data_dir())}
    done = subprocess.run(
        [sys.executable, "-m", "dpfl", "audit", str(path), "--trials", "10000", "--black-box-trials", "300",
         "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [r["verdict"] for r in out["releases"]] == ["no violation found"]  # its std is as claimed
    assert (out["black_box"]["verdict"], out["black_box"]["trials"]) == ("violation", 300)


def test_the_profile_of_a_gaussian_is_its_tradeoff_curve_and_a_test_above_it_is_an_excess():
    profile = Profile.of([GaussianEvent(1.0)], delta=1e-5, accountant="pld")
    assert profile.epsilon == pytest.approx(4.4, abs=0.15)  # μ = 1 GDP at δ = 1e-5
    # μ-GDP: TPR = Φ(Φ⁻¹(FPR) + 1); at FPR 0.05, 0.260 is on the curve, 0.30 above it
    assert -0.05 < profile.excess(0.259, 0.05) < 0.0 < profile.excess(0.30, 0.05)
    assert profile.excess(0.5, 0.5) < 0  # a coin flip proves nothing


def test_repeated_noise_cancels_in_the_repeat_statistic_and_fresh_noise_does_not():
    rng = np.random.default_rng(0)
    ref_d = np.array([[1.0, 0.0], [0.0, 1.0]])  # the unit moves one direction, then another
    ref_dp = np.zeros((2, 2))
    fresh = [ref + rng.normal(0, 1.0, (500, 2, 2)) for ref in (ref_d, ref_dp)]
    same = [ref + np.repeat(rng.normal(0, 1.0, (500, 1, 2)), 2, axis=1) for ref in (ref_d, ref_dp)]
    s_fresh = [statistics_of(moves, ref_d, ref_dp)["repeat"] for moves in fresh]
    s_same = [statistics_of(moves, ref_d, ref_dp)["repeat"] for moves in same]
    assert np.allclose(s_same[0], 2.0) and np.allclose(s_same[1], -2.0)  # deterministic: the data shows
    assert s_fresh[0].std() > 1 and s_fresh[1].std() > 1


def test_a_noise_repeated_across_rounds_cancels_against_the_true_replay():
    rng = np.random.default_rng(1)
    # each trial's rounds replayed without noise from its own state: D moves the model by the
    # unit's pull, which turns between rounds; D′ by nothing
    pull = np.array([[1.0, 0.0], [0.6, 0.8]])
    replayed = np.stack([pull, np.zeros((2, 2))], axis=1)[None].repeat(400, axis=0)  # [T, R, 2, P]
    ref = (pull, np.zeros((2, 2)))
    noise = np.repeat(rng.normal(0, 1.0, (400, 1, 2)), 2, axis=1)
    on_d = statistics_of(pull + noise, *ref, replayed)["replay"]
    on_dp = statistics_of(noise, *ref, replayed)["replay"]
    turn = float(np.sum((pull[1] - pull[0]) ** 2))
    assert np.allclose(on_d, turn) and np.allclose(on_dp, -turn)  # the data shows through
    fresh = statistics_of(rng.normal(0, 1.0, (400, 2, 2)), *ref, replayed)["replay"]
    assert fresh.std() > 1

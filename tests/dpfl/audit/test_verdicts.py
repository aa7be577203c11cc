"""The auditor's verdicts (issue 39, measurement 8): a float tolerance that fits float32, a proven
violation kept apart from an inconclusive single test, several seeds under family-wise control,
and coverage a plugin declares through the plugin interface ("not auditable yet" otherwise)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dpfl.audit.rounds import ReleaseAudit, _bounds
from tests.factories import data_dir

ROOT = Path(__file__).resolve().parents[3]
SPEC = {
    "algorithm": "plugin_mbsgd",
    "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 3},
    "model": {"name": "logreg"},
    "rounds": 2,
    "seed": 3,
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
}


def release(**fields) -> ReleaseAudit:
    base = {
        "release": "silo-0",
        "neighbours": "n",
        "max_sensitivity_ratio": 1.0,
        "claimed_sensitivity": 1.0,
        "noise_std": 1.0,
        "noise_multiplier": 1.0,
        "epsilon_lower": 1.0,
        "epsilon_lower_each": 1.0,
        "epsilon_ledger": 2.0,
        "trials": 1000,
    }
    return ReleaseAudit(**(base | fields))


def test_a_float32_rounding_of_the_sensitivity_is_no_violation_and_a_real_excess_is():
    assert release(max_sensitivity_ratio=1.0000015).verdict == "no violation found"  # dp_fedsgd, measured
    assert release(max_sensitivity_ratio=1.001).verdict == "violation"


def test_one_tests_bound_above_the_ledger_is_inconclusive_and_a_family_wise_one_is_a_violation():
    # sdp_mbsgd, measured: one seed's 95 % bound 2.8619 against ε₀ 2.8609 (others 2.73–2.84)
    tight = release(epsilon_lower=2.80, epsilon_lower_each=2.8619, epsilon_ledger=2.8609)
    assert (tight.verdict, tight.sound) == ("inconclusive", True)
    proven = release(epsilon_lower=2.9, epsilon_lower_each=3.0, epsilon_ledger=2.8609)
    assert (proven.verdict, proven.sound, proven.to_json()["verdict"]) == ("violation", False, "violation")


def test_the_family_wise_bound_over_seeds_is_below_each_tests_and_never_above_a_tight_epsilon():
    eps0, n = 1.0, 200_000  # randomized response: the threshold test meets ε₀ exactly
    p = math.exp(eps0) / (1 + math.exp(eps0))
    samples = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        samples.append(((rng.random(n) < p).astype(float), (rng.random(n) < 1 - p).astype(float)))
    bounds = _bounds(samples, delta=0.0, confidence=0.95, tests=20)
    assert 0.9 < bounds["epsilon_lower"] < bounds["epsilon_lower_each"] <= eps0


def _dpfl(tmp_path: Path, spec: dict, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "DPFL_PLUGINS": "tests.audited_plugin", "DPFL_DATA_DIR": str(data_dir())}
    return subprocess.run(
        [sys.executable, "-m", "dpfl", "audit", str(path), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_plugin_declares_its_coverage_and_is_audited_over_seeds(tmp_path):
    done = _dpfl(
        tmp_path,
        SPEC,
        "--trials",
        "20000",
        "--seed",
        "5",
        "--seeds",
        "2",
        "--black-box-trials",
        "200",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    releases = json.loads(done.stdout)["releases"]
    black = json.loads(done.stdout)["black_box"]  # its coverage names no canary: the fuzzer's worst pair
    assert (black["seeds"], black["trials"], black["verdict"]) == (2, 200, "no violation found")
    assert black["neighbours"].startswith("silo ") and "Dirac" not in black["neighbours"]
    assert sorted(r["release"] for r in releases) == ["silo-0", "silo-1", "silo-2"]
    for r in releases:
        assert (r["seeds"], r["trials"], r["verdict"]) == (2, 20000, "no violation found")
        assert r["max_sensitivity_ratio"] == 1.0 or abs(r["max_sensitivity_ratio"] - 1) < 1e-4
        assert 0 < r["epsilon_lower"] <= r["epsilon_lower_each"] < r["epsilon_ledger"]


def test_a_private_algorithm_without_coverage_is_not_auditable_yet_and_never_called_not_private(tmp_path):
    done = _dpfl(tmp_path, SPEC | {"algorithm": "plugin_unaudited"})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: `algorithm` 'plugin_unaudited' is not auditable yet: it declares no audit coverage "
        "(`Algorithm.audit_coverage`, a `dpfl.audit.coverage.Coverage`).\n"
    )
    public = _dpfl(tmp_path, SPEC | {"algorithm": "fedavg", "params": {"lr": 0.1}})
    assert public.stderr == (
        "error: `algorithm` 'fedavg' is not private: it releases without noise, so there is nothing "
        "to audit.\n"
    )


def test_a_run_of_an_algorithm_the_auditor_cannot_check_says_so(tmp_path):
    out = tmp_path / "result.json"
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC | {"algorithm": "plugin_unaudited", "rounds": 1}))
    env = {**os.environ, "DPFL_PLUGINS": "tests.audited_plugin", "DPFL_DATA_DIR": str(data_dir())}
    done = subprocess.run(
        [sys.executable, "-m", "dpfl", "run", str(path), "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    caveats = json.loads(out.read_text())["privacy"]["caveats"]
    assert {
        "kind": "unaudited",
        "text": "plugin_unaudited declares no audit coverage, so the auditor cannot check that its releases "
        "match its ledger",
        "breaks_guarantee": False,
    } in caveats

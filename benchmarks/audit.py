"""Audit benchmark: how close the auditor's ε lower bound comes to the ledger's ε, per family.

For one algorithm of each Gaussian family (and ULDP-NAIVE), a one-round spec with every sampling
rate 1 (so the ledger's ε is that of the one release the audit tests, not an amplified one) and
σ calibrated by the PLD accountant to ε = 4 at δ = 1e-5. `audit_first_round` fuzzes the
release on the notion's neighbours, then draws N = 10⁶ trials per side along the worst pair's
direction and bounds ε by Clopper–Pearson (dpfl/audit/). The ratio lower bound ÷ ledger ε says
how much of the claimed ε the audit can exhibit (target ≥ 0.5; Jagielski et al. 2020 and Nasr
et al. 2021 report the same kind of ratio for DP-SGD). A ratio below 1 in sensitivity (the
neighbours move the release by less than the noise assumes) caps it: such a release leaks less
than its ledger says, which no audit can show more of.

The planted bug: ISRL-DP MB-SGD's worst release drawn with half its noise std while the ledger
keeps σ, i.e. code that adds σC/2 and claims σC. Its lower bound must exceed the ledger's ε.

Usage: python -m benchmarks.audit [--trials N] [--no-write]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import print_headline, publish
from dpfl.audit.fuzz import fixed_sample_spec, fuzz
from dpfl.audit.rounds import audit_first_round
from dpfl.audit.statistics import epsilon_lower_bound
from dpfl.audit.trials import projected_trials
from dpfl.privacy.calibration import epsilon
from dpfl.privacy.events import GaussianEvent
from dpfl.runner import prepare, project
from dpfl.spec import parse_spec

TITLE = "Audit: ε lower bound vs ledger ε at ε = 4"
EPSILON, DELTA, TRIALS = 4.0, 1e-5, 1_000_000
TARGET_RATIO = 0.5
DIGITS = {"name": "digits", "silos": 3}
DIGITS_USERS = DIGITS | {"users": {"kind": "uniform", "count": 20}}
LOGISTIC = {"name": "logistic", "silos": 3, "options": {"num_samples": 400, "num_test": 100}}
ALL = 1_000  # a batch larger than every digits silo (≈ 480 records): Poisson rate 1

# (algorithm, dataset, params with every sampling rate 1)
CASES = [
    ("isrl_mbsgd", DIGITS, {"batch_size": ALL}),
    ("dp_fedsgd", DIGITS, {"batch_size": ALL}),
    ("dp_fedavg", DIGITS, {"local_steps": 3, "sample_rate": 1.0}),
    ("uldp_avg", DIGITS_USERS, {"local_epochs": 1, "user_sampling_rate": 1.0}),
    ("uldp_naive", {"name": "digits", "silos": 2}, {}),
    ("gdp_gd", LOGISTIC, {}),
]


def spec_of(algorithm: str, dataset: dict, params: dict):
    return parse_spec(
        {
            "algorithm": algorithm,
            "params": params,
            "dataset": dataset,
            "model": {"name": "logreg"},
            "rounds": 1,
            "seed": 3,
            "privacy": {"epsilon": EPSILON, "delta": DELTA, "accountant": "pld"},
        }
    )


def planted_half_noise(data_dir: Path, trials: int) -> tuple[float, float]:
    """Returns (lower bound, ledger ε) of ISRL-DP MB-SGD's worst release drawn with half its noise."""
    spec = spec_of(*CASES[0])
    algorithm = prepare(spec, data_dirs=[data_dir])
    privacy = project(algorithm)
    fixed = type(algorithm)(fixed_sample_spec(spec, algorithm.data), algorithm.data, algorithm.model)
    worst = max(fuzz(fixed, privacy.noise_multiplier), key=lambda g: g.ratio)
    on_d, on_dp = projected_trials(
        worst.value_d, worst.value_d_prime, noise_std=worst.noise_std / 2, trials=trials, seed=0
    )
    bound = epsilon_lower_bound(on_d, on_dp, delta=DELTA)
    return bound.epsilon, float(epsilon(worst.event, delta=DELTA, accountant=privacy.accountant))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=TRIALS, help="trials per side")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    data_dir = Path(os.environ.get("DPFL_DATA_DIR", "data"))
    rows, measured, ok = [], {}, True
    for algorithm, dataset, params in CASES:
        start = time.perf_counter()
        audits = audit_first_round(
            spec_of(algorithm, dataset, params), data_dirs=[data_dir], trials=args.trials
        )
        seconds = time.perf_counter() - start
        best = max(audits, key=lambda a: a.epsilon_lower)  # the party the audit gets closest on
        ratio = best.epsilon_lower / best.epsilon_ledger
        sens = max(a.max_sensitivity_ratio for a in audits)
        sound = all(a.sound for a in audits)
        # The ε of a Gaussian moved only by the measured gap (multiplier σ / sensitivity ratio):
        # the most any test of these neighbours can exhibit, so what the audit's power is out of.
        reachable = float(epsilon(GaussianEvent(best.noise_multiplier / sens), delta=DELTA, accountant="pld"))
        met = ratio >= TARGET_RATIO
        ok &= sound
        measured[algorithm] = {
            "epsilon_lower": best.epsilon_lower,
            "epsilon_ledger": best.epsilon_ledger,
            "ratio": ratio,
            "max_sensitivity_ratio": sens,
            "epsilon_reachable": reachable,
            "ratio_of_reachable": best.epsilon_lower / reachable,
            "noise_multiplier": best.noise_multiplier,
            "seconds": seconds,
            "sound": sound,
        }
        rows.append(
            f"| {algorithm} | {best.release} | {best.noise_multiplier:.4f} | {best.epsilon_lower:.3f} | "
            f"{best.epsilon_ledger:.3f} | {ratio:.2f} | {'yes' if met else 'no'} | {sens:.4f} | "
            f"{reachable:.3f} | {best.epsilon_lower / reachable:.2f} | "
            f"{'yes' if sound else 'NO'} | {seconds:.1f} s |"
        )
    start = time.perf_counter()
    bug_lower, bug_ledger = planted_half_noise(data_dir, args.trials)
    bug_s = time.perf_counter() - start
    caught = bug_lower > bug_ledger
    ok &= caught
    measured["planted_half_noise"] = {
        "epsilon_lower": bug_lower,
        "epsilon_ledger": bug_ledger,
        "seconds": bug_s,
    }
    rows.append(
        f"| planted bug: isrl_mbsgd with half the noise | worst silo | — | {bug_lower:.3f} | "
        f"{bug_ledger:.3f} | "
        f"{bug_lower / bug_ledger:.2f} | — | — | — | — | "
        f"{'caught' if caught else 'NOT CAUGHT'} | {bug_s:.1f} s |"
    )
    ratios = [m["ratio"] for k, m in measured.items() if k != "planted_half_noise"]
    table = "\n".join(
        [
            f"One round, every sampling rate 1, σ calibrated (PLD) to ε = {EPSILON:g} at δ = {DELTA:g}; "
            f"{args.trials:,} trials per side (half choose the test, half bound it), 95 % Clopper–Pearson. "
            "Lower bound and ledger ε of the party the audit gets closest on; sensitivity ratio: the "
            "fuzzer's worst ‖v_D − v_D′‖ ÷ the sensitivity the noise assumes (≤ 1 is sound); ε at that "
            "sensitivity: the PLD ε of a Gaussian of multiplier σ ÷ that ratio, the most a test of "
            "these neighbours can show (below 4 the neighbours, not the trials, limit the audit). Time: "
            "fuzzing, trials and bound, data loading included.",
            "",
            "| algorithm | release | σ | ε lower bound | ledger ε | ratio | ≥ 0.5 | sensitivity ratio "
            "| ε at that sensitivity | lower bound ÷ it | sound | time |",
            "|---|---|---:|---:|---:|---:|:-:|---:|---:|---:|:-:|---:|",
            *rows,
        ]
    )
    publish(TITLE, table, write=not args.no_write)
    print_headline(
        "audit",
        headline=f"ε lower bound ÷ ledger ε from {min(ratios):.2f} to {max(ratios):.2f} at ε = {EPSILON:g}; "
        f"half the noise: {bug_lower:.2f} > {bug_ledger:.2f} {'caught' if caught else 'NOT caught'}",
        target=f"every release sound, planted bug caught; ratio ≥ {TARGET_RATIO} where the sensitivity "
        "is tight",
        met=ok,
        **measured,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Reproduces seed 000's MNIST ε sweep (reference/000_isrl_dp.md §6.2) and prints a markdown table.

For each algorithm, M ∈ {12, 25} and ε ∈ {0.75, …, 18}: runs of configs/paper/isrl_mnist.yaml
calibrated on the accountant at two step sizes, keeping the one with the lower final training loss
(the paper selected by test accuracy), and the true ε of the paper's closed-form σ
(`calibration: paper`) from the plan alone. Usage:

    DPFL_DATA_DIR=/path/to/data python scripts/reproduce_isrl_mnist.py [--seeds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from dpfl.runner import prepare, project, run
from dpfl.spec import parse_spec, spec_fields

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "paper" / "isrl_mnist.yaml"
EPSILONS = (0.75, 1.0, 1.5, 3.0, 6.0, 12.0, 18.0)
PARAMS = {
    "isrl_mbsgd": {"batch_size": 128, "clip": 1.0},
    "isrl_localsgd": {"batch_size": 64, "clip": 1.0, "local_steps": 3},
    "isrl_spider": {"batch_size": 128, "clip": 1.0, "phase": 4},
}
STEP_SIZES = {"isrl_mbsgd": (1.0, 2.0), "isrl_localsgd": (0.4, 0.8), "isrl_spider": (1.0, 2.0)}


def _mean_final(spec: dict, seeds: int, dirs: list[Path]) -> tuple[float, float]:
    """Returns (mean final training loss, mean final test accuracy) over `seeds` seeds."""
    finals = [run(parse_spec(spec | {"seed": seed}), data_dirs=dirs).final for seed in range(seeds)]
    train_loss = statistics.mean(f.diagnostics["train_loss"] for f in finals)  # a diagnostic: not private
    return train_loss, statistics.mean(f.accuracy for f in finals)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    dirs = [Path(os.environ["DPFL_DATA_DIR"])]
    base = spec_fields(CONFIG.read_text())
    print("| M | algorithm | " + " | ".join(f"ε={e:g}" for e in EPSILONS) + " |")
    print("|---|---|" + "---|" * len(EPSILONS))
    for m in (12, 25):
        for name, params in PARAMS.items():
            errors, paper_eps = [], []
            for eps in EPSILONS:
                privacy = base["privacy"] | {"epsilon": eps}
                spec = base | {"algorithm": name, "participation": m, "privacy": privacy}
                best = min(
                    (
                        (*_mean_final(spec | {"params": params | {"lr": lr}}, args.seeds, dirs), lr)
                        for lr in STEP_SIZES[name]
                    ),
                    key=lambda t: t[0],
                )
                errors.append(f"{100 * (1 - best[1]):.1f} (lr {best[2]:g})")
                paper = parse_spec(spec | {"params": params, "privacy": privacy | {"calibration": "paper"}})
                paper_eps.append(f"{project(prepare(paper, data_dirs=dirs)).planned_epsilon[-1]:.2f}")
            print(f"| {m} | {name} test error % | " + " | ".join(errors) + " |", flush=True)
            print(f"| {m} | {name} true ε of paper σ | " + " | ".join(paper_eps) + " |", flush=True)


if __name__ == "__main__":
    main()

"""Sweep benchmark: the isrl_mnist setting's runs in one process, against their own training.

What `dpfl reproduce isrl` runs (every point of every setting of configs/paper/isrl_*.yaml),
timed twice, each in a fresh process so that neither inherits the other's caches:

- *one by one*: `runner.run` per point, as the CLI ran them before batching; the sum of those
  runs' own training and evaluation (`timings.train_s + eval_s`) is the floor;
- *batched*: `dpfl.reproduce.local.run_sweeps`, as the CLI runs them now: the points of a batch
  (`dpfl.batching`: runs of one algorithm and params that differ in ε and seed; every ISRL-DP
  method batches) start one by one and train together.

Targets: under 60 s, and at most 1.5× the floor (the median over three pairs of fresh processes, one by
one then batched: the machine's speed drifts), for the 63 runs the target was set on (every
method at its configured parameters). The sweep has since grown to 126 runs (SPIDER tuned over
four candidates per ε, as the paper picks it); that workload is measured beside it, for reference.

Usage: python -m benchmarks.sweep [--paper NAME] [--no-write]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import print_headline, publish  # noqa: E402
from dpfl import runner  # noqa: E402
from dpfl.batching import batches  # noqa: E402
from dpfl.reproduce import default_config_dir, load_paper  # noqa: E402
from dpfl.reproduce.local import run_sweeps  # noqa: E402
from dpfl.spec import parse_spec  # noqa: E402

TARGET_S, TARGET_RATIO = 60.0, 1.5
PAIRS = 3
TITLE = "Sweep: a reproduction's runs against their own training"


def _configured(setting) -> object:
    """Returns a filter keeping the points that run a method at its configured parameters: the
    sweep as it was when the target was set, before SPIDER's tuning candidates."""
    spider = setting.spec["params"]

    def keep(point) -> bool:
        data = point.data
        return data["algorithm"] != "isrl_spider_alt" and (
            data["algorithm"] != "isrl_spider" or data["params"] == spider
        )

    return keep


def _one_by_one(specs, data_dirs) -> dict[str, float]:
    floor = setup = 0.0
    start = time.perf_counter()
    for spec in specs:
        timings = runner.run(spec, data_dirs=data_dirs).timings
        floor += timings["train_s"] + timings["eval_s"]
        setup += timings["setup_s"]
    return {"wall": time.perf_counter() - start, "floor": floor, "setup": setup}


def _batched(sweeps, data_dirs) -> dict[str, float]:
    start = time.perf_counter()
    outcomes = run_sweeps(sweeps, data_dirs=data_dirs)
    failed = [o.label for o in outcomes if o.status != "succeeded"]
    if failed:
        raise SystemExit(f"points failed: {failed}")
    return {"wall": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paper", default="isrl")
    # the setting the throughput target names (63 runs then; SPIDER now runs as four tuning
    # candidates); the paper's own task has a sweep of its own
    parser.add_argument("--setting", default="isrl_mnist")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--mode", choices=["one-by-one", "batched"], help=argparse.SUPPRESS)
    parser.add_argument("--configured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    data_dirs = [Path(p) for p in os.environ.get("DPFL_DATA_DIR", "").split(os.pathsep) if p]
    settings = [s for s in load_paper(args.paper, default_config_dir()) if s.name == args.setting]
    sweeps = [s.sweep() for s in settings]
    if args.configured:
        sweeps = [
            dataclasses.replace(sweep, points=list(filter(_configured(setting), sweep.points)))
            for sweep, setting in zip(sweeps, settings, strict=True)
        ]
    if args.mode is not None:  # one mode, in this fresh process: its numbers as JSON
        specs = [parse_spec(p.data) for s in sweeps for p in s.points]
        numbers = _one_by_one(specs, data_dirs) if args.mode == "one-by-one" else _batched(sweeps, data_dirs)
        print(json.dumps(numbers | {"runs": len(specs), "batches": len(batches(specs))}))
        return 0
    rows, measured, ratios = [], {}, {}
    for workload in ("configured", "tuned"):
        # The floor and the batched wall time come from different processes, minutes apart, on a
        # machine whose speed drifts by a fifth within minutes: the target's workload is measured
        # in PAIRS adjacent (one by one, batched) pairs and judged by the pairs' median ratio.
        pairs = []
        for _ in range(PAIRS if workload == "configured" else 1):
            pair = {}
            for mode in ("one-by-one", "batched"):
                cmd = [sys.executable, "-m", "benchmarks.sweep", "--paper", args.paper]
                cmd += ["--setting", args.setting, "--mode", mode]
                cmd += ["--configured"] if workload == "configured" else []
                out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
                pair[mode] = json.loads(out.strip().splitlines()[-1])
            pairs.append(pair)
        ratios[workload] = sorted(p["batched"]["wall"] / p["one-by-one"]["floor"] for p in pairs)
        ratio = statistics.median(ratios[workload])
        # the pair whose ratio is the median fills the row
        chosen = min(pairs, key=lambda p: abs(p["batched"]["wall"] / p["one-by-one"]["floor"] - ratio))
        alone, together = chosen["one-by-one"], chosen["batched"]
        measured[workload, "one-by-one"], measured[workload, "batched"] = alone, together
        judged = workload == "configured"
        met = together["wall"] < TARGET_S and ratio <= TARGET_RATIO
        what = "each method as configured (the target's)" if judged else "SPIDER tuned (for reference)"
        rows.append(
            f"| {together['runs']}: {what} | {together['batches']} | {alone['wall']:.1f} s | "
            f"{together['wall']:.1f} s | {alone['floor']:.1f} s | {alone['setup']:.1f} s | {ratio:.2f}× | "
            + (f"< {TARGET_S:g} s, ≤ {TARGET_RATIO:g}× | {'yes' if met else 'no'} |" if judged else "— | — |")
        )
    body = "\n".join(
        [
            f"The `{args.setting}` setting of `dpfl reproduce {args.paper}` in one process, each way in a "
            "fresh process: one by one (`runner.run` per point), and batched as the CLI runs them "
            "(`dpfl.batching`). The floor is the sum of the runs' own training and evaluation time, "
            "measured one by one. The target was set on its 63 runs, every method at its configured "
            "parameters; since then the paper's tuning protocol runs SPIDER as four candidates per ε "
            "(Alg. 3 with q ∈ {1, 2, 4} and Alg. 11), 126 runs in all, measured beside it.",
            "",
            f"The target's workload ran as {PAIRS} pairs of fresh processes, one by one then batched, "
            "and is judged by the median of the pairs' ratios (the row shows the pair nearest it): the "
            "machine's speed drifts between the processes of one pair, let alone between pairs. Ratios "
            "of the pairs: " + ", ".join(f"{r:.2f}×" for r in ratios["configured"]) + ".",
            "",
            "| runs | batches | one by one | batched | training + evaluation (floor) "
            "| set-up, summed (one by one) | batched / floor | targets | met |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|",
            *rows,
        ]
    )
    publish(TITLE, body, write=not args.no_write)
    configured, tuned = measured["configured", "batched"], measured["tuned", "batched"]
    floor = measured["configured", "one-by-one"]["floor"]
    ratio = statistics.median(ratios["configured"])
    met = configured["wall"] < TARGET_S and ratio <= TARGET_RATIO
    print_headline(
        "sweep",
        headline=(
            f"{configured['runs']} runs in {configured['wall']:.1f} s batched, {ratio:.2f}× their training "
            f"and evaluation; {tuned['runs']} with SPIDER tuned in {tuned['wall']:.1f} s"
        ),
        target=f"< {TARGET_S:g} s and ≤ {TARGET_RATIO:g}×",
        met=met,
        wall_s=configured["wall"],
        floor_s=floor,
        tuned_wall_s=tuned["wall"],
        tuned_floor_s=measured["tuned", "one-by-one"]["floor"],
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

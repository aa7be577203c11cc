"""Sweep benchmark: the isrl reproduction's 63 runs in one process, against their own training.

What `dpfl reproduce isrl` runs (every point of every setting of configs/paper/isrl_*.yaml,
one after another in this process, as the CLI runs them), timed from the first run's start to
the last one's end, and compared with the floor: the sum of the runs' own training and
evaluation time (`timings.train_s + eval_s`), measured in the same runs. What lies between the
two is the set-up every run pays (data, calibration, projection, model), which the caches of
issue 19 pay once per sweep. Targets: under 60 s, and at most 1.5× the floor.

Usage: python -m benchmarks.sweep [--paper NAME] [--no-write]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import print_headline, write_section  # noqa: E402
from dpfl import runner  # noqa: E402
from dpfl.reproduce import default_config_dir, load_paper  # noqa: E402
from dpfl.spec import parse_spec  # noqa: E402

TARGET_S, TARGET_RATIO = 60.0, 1.5
TITLE = "Sweep: a reproduction's runs against their own training"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paper", default="isrl")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    data_dirs = [Path(p) for p in os.environ.get("DPFL_DATA_DIR", "").split(os.pathsep) if p]
    specs = [
        parse_spec(p.data) for s in load_paper(args.paper, default_config_dir()) for p in s.sweep().points
    ]
    floor, setup = 0.0, 0.0
    start = time.perf_counter()
    for spec in specs:
        timings = runner.run(spec, data_dirs=data_dirs).timings
        floor += timings["train_s"] + timings["eval_s"]
        setup += timings["setup_s"]
    wall = time.perf_counter() - start
    ratio = wall / floor
    met = wall < TARGET_S and ratio <= TARGET_RATIO
    body = "\n".join(
        [
            f"`dpfl reproduce {args.paper}`'s {len(specs)} runs, one after another in one process (as the "
            "CLI runs them), from the first run's start to the last one's end; the floor is the sum of "
            "the runs' own training and evaluation time, measured in the same runs.",
            "",
            "| runs | wall | training + evaluation (floor) | set-up, summed | wall / floor | targets | met |",
            "|---:|---:|---:|---:|---:|---|---|",
            f"| {len(specs)} | {wall:.1f} s | {floor:.1f} s | {setup:.1f} s | {ratio:.2f}× "
            f"| < {TARGET_S:g} s, ≤ {TARGET_RATIO:g}× | {'yes' if met else 'no'} |",
        ]
    )
    print(body)
    if not args.no_write:
        write_section(TITLE, body)
    print_headline(
        "sweep",
        headline=f"{len(specs)} runs in {wall:.1f} s, {ratio:.2f}× their training and evaluation",
        target=f"< {TARGET_S:g} s and ≤ {TARGET_RATIO:g}×",
        met=met,
        wall_s=wall,
        floor_s=floor,
        setup_s=setup,
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

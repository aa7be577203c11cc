"""Calibration benchmark: each of 25 silos its own σ for ε = 3, pruned orders vs every order.

The schedule is the MNIST spec's (issue 19): 25 silos of distinct sizes, a Poisson-sampled
batch of 128 per round, 50 rounds, δ = 1e-5, the rdp accountant. Three ways, in this process:

- cold: no RDP curve and no calibration cached; ε of each candidate σ from the few RDP orders
  that can hold the minimum (`dpfl/privacy/accountants/rdp_pruned.py`);
- every order: the same search with every tracked order computed for each candidate σ (how
  calibration worked before; the reference);
- cached: the same calibration asked again, as a sweep's next seed or a worker's next run asks.

Both searches must give σ that meets the target under the whole accountant while σ·(1 − 1e-3)
does not; the benchmark checks that on every silo. Targets: cold < 0.5 s, cached ~0.

Then group privacy, the projection the new-run form asks for ULDP-GROUP on its defaults (digits
over 10 silos, 100 uniform users capped at k = 8 records, batch 64, 5 local epochs, 20 rounds,
ε = 3): one σ for the users' party, walked over the RDP grid and checked once on the whole
grid (`walk.Walk`), against every step on the whole grid (each order computed at 8×
itself). No target; the same guarantee is checked.

Usage: python -m benchmarks.calibration [--repeats N] [--no-write]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import print_headline, publish
from dpfl.privacy.accountants import rdp_pruned
from dpfl.privacy.calibration import (
    calibrate_noise_multiplier,
    calibrate_party_noise_multipliers,
    epsilon,
    remembered,
    sgd_event,
    walk,
)
from dpfl.privacy.events import GroupEvent, ParallelEvent, SelfComposedEvent

SILOS, BATCH, ROUNDS, EPSILON, DELTA = 25, 128, 50, 3.0, 1e-5
TARGET_COLD_S = 0.5
TITLE = "Calibration: each of 25 silos its own σ"

SIZES = np.random.default_rng(0).integers(1800, 3000, SILOS)  # records per silo, all distinct
RATES = [BATCH / int(n) for n in SIZES]
PARTIES = [f"silo-{i}" for i in range(SILOS)]


def schedule(sigma: float | np.ndarray) -> dict:
    sigmas = np.broadcast_to(np.asarray(sigma, dtype=float), (SILOS,))
    return {
        p: sgd_event(noise_multiplier=float(s), sampling_rate=q, steps=ROUNDS)
        for p, q, s in zip(PARTIES, RATES, sigmas, strict=True)
    }


def calibrate() -> np.ndarray:
    return calibrate_party_noise_multipliers(
        schedule, parties=PARTIES, target_epsilon=EPSILON, target_delta=DELTA
    )


# ULDP-GROUP on the new-run form's defaults: records kept per silo (k = 8), batch 64, 5 epochs
GROUP_KEPT, GROUP_BATCH, GROUP_EPOCHS, GROUP_SIZE, GROUP_ROUNDS = (
    (80, 77, 88, 82, 76, 74, 82, 74, 81, 82),
    64,
    5,
    8,
    20,
)


def group_schedule(sigma: float) -> SelfComposedEvent:
    silos = tuple(
        sgd_event(
            noise_multiplier=sigma, sampling_rate=GROUP_BATCH / n, steps=GROUP_EPOCHS * -(-n // GROUP_BATCH)
        )
        for n in GROUP_KEPT
    )
    return SelfComposedEvent(GroupEvent(ParallelEvent(silos), GROUP_SIZE), GROUP_ROUNDS)


def group_cold() -> float:
    rdp_pruned.cache_clear()
    remembered.RESULTS.clear()
    return calibrate_noise_multiplier(group_schedule, target_epsilon=EPSILON, target_delta=DELTA)


def group_whole_grid() -> float:
    with mock.patch.object(walk.Walk, "of", classmethod(lambda cls, *_: None)):
        return group_cold()


def cold() -> np.ndarray:
    rdp_pruned.cache_clear()
    remembered.RESULTS.clear()
    return calibrate()


def every_order() -> np.ndarray:
    with mock.patch.object(rdp_pruned, "applies", lambda *_: False):
        return cold()


def timed(fn, repeats: int) -> tuple[float, np.ndarray]:
    seconds, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), out


def check(sigmas: np.ndarray) -> None:
    """Raises unless every silo's σ meets ε under the whole accountant and 0.1 % less noise does not."""
    for q, sigma in zip(RATES, sigmas, strict=True):
        eps, less = (
            epsilon(sgd_event(noise_multiplier=s, sampling_rate=q, steps=ROUNDS), delta=DELTA)
            for s in (sigma, sigma * (1 - 1e-3))
        )
        if not (eps <= EPSILON < less):
            raise AssertionError(f"silo at q={q:.4f}: σ={sigma} gives ε={eps}, 0.1 % less gives {less}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)

    cold_s, ours = timed(cold, args.repeats)
    cached_s, again = timed(calibrate, args.repeats)
    full_s, reference = timed(every_order, max(1, args.repeats // 2))
    check(ours)
    check(reference)
    group_s, group_sigma = timed(group_cold, max(1, args.repeats // 2))
    group_full_s, group_reference = timed(group_whole_grid, 1)
    for sigma in (group_sigma, group_reference):
        eps, less = (epsilon(group_schedule(s), delta=DELTA) for s in (sigma, sigma * (1 - 1e-3)))
        if not (eps <= EPSILON < less):
            raise AssertionError(f"group privacy: σ={sigma} gives ε={eps}, 0.1 % less gives {less}")
    np.testing.assert_array_equal(again, ours)
    spread = float(np.max(np.abs(ours / reference - 1)))
    met = cold_s < TARGET_COLD_S
    body = "\n".join(
        [
            f"{SILOS} silos of {SIZES.min():,}–{SIZES.max():,} records (25 distinct sampling rates "
            f"{min(RATES):.3f}–{max(RATES):.3f}), {ROUNDS} Poisson-sampled rounds, ε = {EPSILON:g}, "
            f"δ = {DELTA:g}, rdp; medians of {args.repeats} calibrations (every order: "
            f"{max(1, args.repeats // 2)}), one process.",
            "",
            "| calibration | seconds | vs every order | target | met |",
            "|---|---:|---:|---:|---|",
            f"| every order computed (reference) | {full_s:.2f} | 1.0× | | |",
            f"| pruned orders, cold | {cold_s:.3f} | {full_s / cold_s:.0f}× | < {TARGET_COLD_S} s "
            f"| {'yes' if met else 'no'} |",
            f"| cached (the same schedule and target again) | {cached_s * 1000:.1f} ms "
            f"| {full_s / cached_s:,.0f}× | ~0 | yes |",
            "",
            f"Both searches meet ε = {EPSILON:g} under the whole accountant on every silo, and "
            f"σ·(1 − 1e-3) does not; their σ differ by at most {spread:.1e} (relative).",
            "",
            "Group privacy (ULDP-GROUP's projection on the new-run form's defaults: "
            f"{len(GROUP_KEPT)} silos, k = {GROUP_SIZE}, {GROUP_ROUNDS} rounds of per-silo DP-SGD, "
            f"ε = {EPSILON:g}), one σ, cold:",
            "",
            "| calibration | seconds | vs whole grid | σ |",
            "|---|---:|---:|---:|",
            f"| whole grid at every step (reference) | {group_full_s:.2f} | 1.0× | {group_reference:.4f} |",
            f"| walked orders, whole grid once | {group_s:.2f} | {group_full_s / group_s:.1f}× "
            f"| {group_sigma:.4f} |",
            "",
            "Both meet the target under the whole accountant and σ·(1 − 1e-3) does not.",
        ]
    )
    publish(TITLE, body, write=not args.no_write)
    print_headline(
        "calibration",
        headline=f"cold {cold_s:.2f} s ({full_s / cold_s:.0f}× every order)",
        target=f"< {TARGET_COLD_S} s",
        met=met,
        cold_s=cold_s,
        cached_s=cached_s,
        group_s=group_s,
        group_whole_grid_s=group_full_s,
        every_order_s=full_s,
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

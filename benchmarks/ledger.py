"""Ledger benchmark: recompute the ε curve of 100 parties × 1,000 rounds, fast path vs reference.

The fast path is `Ledger.epsilon_by_round` (parties with the same history accounted once, RDP
curves cached per distinct event, one vectorised conversion). It is timed cold (every distinct
event's RDP curve computed by dp_accounting first) and warm (curves cached, as when the
dashboard re-asks for another δ). The reference is what a researcher writes with dp_accounting
directly: one RdpAccountant per party, composed and converted after every round. Both run in
this process on the same ledgers; the table goes to docs/benchmarks.md. Target: a warm
recompute under 1 s, and a cold one under 1 s when the silos share one sampling rate.

Usage: python benchmarks/ledger.py [--reference-rounds N] [--no-write]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import dp_accounting
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import print_headline, publish
from dpfl.privacy.accountants import rdp_pruned
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent
from dpfl.privacy.ledger import Ledger

PARTIES, ROUNDS, DELTA, SIGMA = 100, 1000, 1e-5, 1.1
TARGET_S = 1.0


def build(heterogeneous: bool) -> Ledger:
    ledger = Ledger()
    rates = np.linspace(0.01, 0.2, PARTIES) if heterogeneous else np.full(PARTIES, 0.05)
    events = [PoissonSampledEvent(float(q), GaussianEvent(SIGMA)) for q in rates]
    for r in range(1, ROUNDS + 1):
        for p, event in enumerate(events):
            ledger.record(r, f"silo-{p}", event)
    return ledger


def cold(ledger: Ledger) -> np.ndarray:
    rdp_pruned.cache_clear()  # every distinct event's RDP values and every curve are recomputed
    return ledger.epsilon_by_round(delta=DELTA)


def warm(ledger: Ledger) -> np.ndarray:
    return ledger.epsilon_by_round(delta=DELTA)


def reference(ledger: Ledger, rounds: int) -> float:
    """Seconds per round of the per-party dp_accounting loop (timed on the first `rounds` rounds)."""
    start = time.perf_counter()
    by_party = {}
    for e in ledger.entries:
        if e.round > rounds:
            continue
        acc = by_party.setdefault(e.party, dp_accounting.rdp.RdpAccountant())
        acc.compose(
            dp_accounting.PoissonSampledDpEvent(e.event.sampling_rate, dp_accounting.GaussianDpEvent(SIGMA))
        )
        acc.get_epsilon(DELTA)
    return (time.perf_counter() - start) / rounds


def median_time(fn, repeats: int = 5) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reference-rounds",
        type=int,
        default=1,
        help="rounds of the slow reference actually timed (extrapolated to 1,000)",
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    logging.getLogger("absl").setLevel(logging.ERROR)
    rows, ok, measured = [], True, {}
    for label, hetero in (
        ("identical silos (q = 0.05)", False),
        ("heterogeneous silos (q from 0.01 to 0.2)", True),
    ):
        ledger = build(hetero)
        t_cold = median_time(lambda ledger=ledger: cold(ledger), repeats=3)
        t_warm = median_time(lambda ledger=ledger: warm(ledger))
        t_ref = reference(ledger, args.reference_rounds) * ROUNDS
        met = t_warm < TARGET_S and (hetero or t_cold < TARGET_S)
        ok &= met
        measured["heterogeneous" if hetero else "identical"] = {
            "cold_s": t_cold,
            "warm_s": t_warm,
            "reference_s": t_ref,
            "speedup_cold": t_ref / t_cold,
        }
        rows.append(
            f"| {label} | {t_cold:.2f} s | {t_warm:.3f} s | {t_ref:,.0f} s (extrapolated) | "
            f"{t_ref / t_cold:,.0f}× | {'yes' if met else 'NO'} |"
        )
    table = "\n".join(
        [
            f"{PARTIES} parties × {ROUNDS} rounds of a Poisson-sampled Gaussian (σ = {SIGMA}), "
            f"cumulative ε per party per round at δ = {DELTA:g}, RDP accountant. Reference: one "
            "dp_accounting RdpAccountant per party, composed and converted each round "
            f"(timed over {args.reference_rounds} rounds, extrapolated).",
            "",
            "| ledger | fast path, cold (median of 3) | fast path, warm (median of 5) "
            "| per-party dp_accounting loop | speed-up (cold) | target met |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"torch threads {torch.get_num_threads()}.",
        ]
    )
    publish("Ledger: ε of 100 parties × 1,000 rounds", table, write=not args.no_write)
    same, mixed = measured["identical"], measured["heterogeneous"]
    print_headline(
        "ledger",
        headline=f"recompute cold {same['cold_s']:.2f} s / {mixed['cold_s']:.2f} s, warm "
        f"{same['warm_s']:.3f} s / {mixed['warm_s']:.3f} s (identical / heterogeneous q); "
        f"{same['speedup_cold']:,.0f}× / {mixed['speedup_cold']:,.0f}× the per-party loop (cold)",
        target=f"warm < {TARGET_S:g} s; cold < {TARGET_S:g} s with identical q",
        met=ok,
        **measured,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: a round on each device this machine has, the engine against the loop on the same device.

Two rounds, each timed on the CPU and, where PyTorch sees one, on the CUDA GPU:

  cifar_isrl: an ISRL-DP MB-SGD round of the ISRL-DP paper's CIFAR-10 setting
      (reference/000_isrl_dp.md §6.3): 10 silos × 1,000 records, K = 346 (R = 50), the paper's
      CNN (`cifar_cnn`, 62,006 parameters), C = 1, σ = 1. (a) the engine: `clipped_grad_sum`
      for all silos at once (on a GPU one dense pass over every silo's samples, `convclip`),
      `gaussian_noise`, one step; (b) the per-silo loop with Opacus's `GradSampleModule`,
      clipping and noise written as its users write them. Data: random
      images of CIFAR-10's shape (3×32×32; a round's time does not depend on the pixels).
  uldp_mnist_cnn: a ULDP-AVG round on MNIST, the setting of benchmarks/uldp.py (5 silos, 100
      zipf users, the ULDP-FL paper's CNN, Q = 1, B = 64) on the real data: (a) the algorithm's
      round, every (silo, user) pair at once; (b) the authors' per-user loop. The paper's full
      MNIST setting (200 rounds × Q = 50) is estimated as 200 × 50 × the round's time.

Both variants of a round draw from the same generators and must agree before they are timed.
Targets (issue 44), on a GPU only: the engine ≥ 10× its loop on the GPU, and the full ULDP MNIST
setting under an hour. On the CPU the table is a record, without targets.

Usage: python -m benchmarks.devices [--repeats N] [--round cifar_isrl|uldp_mnist_cnn] [--no-write]
(--round: that round only, printed and not written over the section, e.g. to spend a lent GPU's
minutes on the round that changed.)
Exits 1 when a GPU target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from benchmarks.report import interleaved_medians, print_headline, publish
from benchmarks.uldp import CONFIGS as ULDP_CONFIGS
from benchmarks.uldp import make_rounds as uldp_rounds
from dpfl.device import placed
from dpfl.engine import (
    NOISE_STREAM,
    SAMPLING_STREAM,
    ParamLayout,
    SiloBatch,
    clipped_grad_sum,
    gaussian_noise,
    sample_without_replacement,
    silo_generator,
)
from dpfl.models import build_model
from dpfl.runner import prepare, project
from dpfl.spec import parse_spec

TARGET_GPU_SPEEDUP = 10.0  # loop time / engine time on the GPU, at least
TARGET_FULL_ULDP_S = 3600.0  # the full ULDP MNIST setting on the GPU, at most
FULL_ULDP_ROUNDS, FULL_ULDP_EPOCHS = 200, 50
CIFAR = {"silos": 10, "records": 1000, "batch": 346, "clip": 1.0, "sigma": 1.0, "lr": 0.1, "seed": 0}
Round = Callable[[int], torch.Tensor]


def cifar_rounds(device: torch.device) -> tuple[Round, Round | None]:
    """Returns the engine's and the Opacus loop's CIFAR-10 ISRL-DP round on `device` (the loop None
    when opacus is not importable); each returns the server's next model from the same start."""
    c = CIFAR
    gen = torch.Generator().manual_seed(c["seed"])
    x = torch.randn(c["silos"] * c["records"], 3, 32, 32, generator=gen).to(device)
    y = torch.randint(0, 10, (c["silos"] * c["records"],), generator=gen).to(device)
    model = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=c["seed"]).to(device)
    layout = ParamLayout.of(model)
    w0 = layout.flatten_module(model).detach()
    k, n, silos = c["batch"], c["records"], list(range(c["silos"]))
    std = c["sigma"] * c["clip"]

    def rows(s: int, r: int) -> torch.Tensor:
        return s * n + sample_without_replacement(n, k, silo_generator(c["seed"], s, r, SAMPLING_STREAM))

    def engine(r: int) -> torch.Tensor:
        with placed(device):
            batch = SiloBatch.from_indices(x, y, [rows(s, r) for s in silos])
            clipped = clipped_grad_sum(model, layout, w0, batch, clip=c["clip"])
            noise = gaussian_noise(
                (layout.size,), std, seed=c["seed"], silos=silos, round=r, stream=NOISE_STREAM
            )
            return w0 - c["lr"] * ((clipped.sum + noise) / k).mean(0)

    try:
        from opacus import GradSampleModule  # optional reference dependency
    except ImportError:
        print(
            "note: opacus is not importable; the CIFAR-10 round has no loop to compare with", file=sys.stderr
        )
        return engine, None
    # a model of its own: Opacus's hooks on the engine's model would fire inside its vmap
    own = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=c["seed"]).to(device)
    gsm = GradSampleModule(own, loss_reduction="sum")
    warnings.filterwarnings("ignore", message="Full backward hook is firing")

    def loop(r: int) -> torch.Tensor:
        total = torch.zeros_like(w0)
        for s in silos:
            layout.load_into(own, w0)  # each silo starts from the server's model
            gsm.zero_grad(set_to_none=True)
            index = rows(s, r).to(device)
            F.cross_entropy(gsm(x[index]), y[index], reduction="sum").backward()
            flat = torch.cat([p.grad_sample.reshape(k, -1) for p in own.parameters()], dim=1)
            factors = c["clip"] / flat.norm(dim=1).clamp(min=c["clip"])
            noise = torch.randn(layout.size, generator=silo_generator(c["seed"], s, r, NOISE_STREAM)) * std
            total += ((factors.unsqueeze(1) * flat).sum(0) + noise.to(device)) / k
        return w0 - c["lr"] * total / len(silos)

    return engine, loop


def uldp_device_rounds(device: torch.device, data_dirs: list[Path]) -> tuple[Round, Round]:
    """Returns ULDP-AVG's vectorised round and the authors' per-user loop on `device`."""
    spec = parse_spec(ULDP_CONFIGS["mnist_cnn"][0])
    alg = prepare(spec, data_dirs=data_dirs, device=device)
    with placed(device):
        alg.setup(project(alg).noise_multiplier)
        vectorised, loop, _, _ = uldp_rounds(alg)

    def on_device(fn: Round) -> Round:
        def run(r: int) -> torch.Tensor:
            with placed(device):
                return fn(r)

        return run

    return on_device(vectorised), on_device(loop)


def synchronised(device: torch.device, fn: Round) -> Round:
    """Returns `fn` that waits for the device's queued work, so that its time is the round's."""
    if device.type != "cuda":
        return fn

    def run(r: int) -> torch.Tensor:
        out = fn(r)
        torch.cuda.synchronize(device)
        return out

    return run


def measure(engine: Round, loop: Round | None, device: torch.device, repeats: int) -> dict:
    """Returns the two variants' agreement and median seconds per round (after a warm-up round)."""
    a = engine(1)
    out: dict = {"engine_s": None, "loop_s": None, "difference": None}
    if loop is not None:
        b = loop(1)
        out["difference"] = float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))
    variants = {"engine_s": synchronised(device, engine)}
    if loop is not None:
        variants["loop_s"] = synchronised(device, loop)
    return out | interleaved_medians(variants, repeats, first=2)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {torch.get_num_threads()} threads"


def render(results: dict[str, dict[str, dict]], repeats: int) -> tuple[str, bool]:
    """Returns the section's body and whether every GPU target is met."""
    lines = [
        "| round | device | engine (s) | loop (s) | loop / engine | max rel. difference |",
        "|---|---|---:|---:|---:|---:|",
    ]
    ok = True
    for name, by_device in results.items():
        for device, res in by_device.items():
            ratio = res["loop_s"] / res["engine_s"] if res["loop_s"] else None
            if device.startswith("cuda") and ratio is not None and ratio < TARGET_GPU_SPEEDUP:
                ok = False
            lines.append(
                f"| {name} | {res['name']} | {res['engine_s']:.4f} | "
                + ("—" if res["loop_s"] is None else f"{res['loop_s']:.4f}")
                + f" | {'—' if ratio is None else f'{ratio:.1f}×'} | "
                + ("—" if res["difference"] is None else f"{res['difference']:.1e}")
                + " |"
            )
    lines += ["", f"Median of {repeats} rounds after a warm-up, variants interleaved."]
    for device, res in results.get("uldp_mnist_cnn", {}).items():
        full = res["engine_s"] * FULL_ULDP_ROUNDS * FULL_ULDP_EPOCHS
        met = full <= TARGET_FULL_ULDP_S
        if device.startswith("cuda"):
            ok = ok and met
        lines.append(
            f"The full ULDP-FL MNIST setting ({FULL_ULDP_ROUNDS} rounds × Q = {FULL_ULDP_EPOCHS}) on "
            f"{res['name']}: about {full / 3600:.1f} h"
            + (f" (target ≤ 1 h: {'met' if met else '**missed**'})." if device.startswith("cuda") else ".")
        )
    lines.append("")
    return "\n".join(lines), ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--round", choices=["cifar_isrl", "uldp_mnist_cnn"], help="that round only")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    data_dirs = [Path(os.environ["DPFL_DATA_DIR"])] if "DPFL_DATA_DIR" in os.environ else []
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rounds = [args.round] if args.round else ["cifar_isrl", "uldp_mnist_cnn"]
    results: dict[str, dict[str, dict]] = {name: {} for name in rounds}
    for device in devices:
        began = time.perf_counter()
        if "cifar_isrl" in rounds:
            res = measure(*cifar_rounds(device), device, args.repeats)
            results["cifar_isrl"][str(device)] = res | {"name": device_name(device)}
        if data_dirs and "uldp_mnist_cnn" in rounds:
            res = measure(*uldp_device_rounds(device, data_dirs), device, args.repeats)
            results["uldp_mnist_cnn"][str(device)] = res | {"name": device_name(device)}
        print(f"{device}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    body, ok = render(results, args.repeats)
    gpu = len(devices) > 1
    title = f"Devices: the engine against the loop on {'a GPU' if gpu else 'the CPU'}"
    publish(
        title + (f" ({device_name(devices[-1])})" if gpu else ""),
        body,
        write=not (args.no_write or args.round),
    )
    speedups = {
        f"{name}@{device}": res["loop_s"] / res["engine_s"]
        for name, by_device in results.items()
        for device, res in by_device.items()
        if res["loop_s"]
    }
    print_headline(
        "devices",
        headline="; ".join(f"{k} {v:.1f}×" for k, v in speedups.items()) + " faster than the loop",
        target=f"on a GPU: ≥ {TARGET_GPU_SPEEDUP:g}× and the full ULDP MNIST setting ≤ 1 h"
        if gpu
        else "none on the CPU",
        met=ok if gpu else None,
        speedup=speedups,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

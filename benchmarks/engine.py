"""Benchmark: one ISRL-DP minibatch-SGD round, vectorised vs per-silo loops vs non-private.

The same round — every silo samples K records without replacement, computes the mean of its
clipped per-sample gradients plus Gaussian noise, the server averages the silos' messages and
takes a gradient step (reference/000_isrl_dp.md §6.2, MB-SGD) — timed in one process on the
same data, three ways:

  (a) the engine: `clipped_grad_sum` for all silos at once (ghost clipping for the MLP),
      `gaussian_noise` for all silos, one average, one update;
  (b) the per-silo Python loop a researcher would write, in two flavours: torch.func (vmap
      over one silo's samples) and Opacus `GradSampleModule` (if opacus is importable);
      the faster flavour is the reference;
  (c) non-private minibatch SGD of the same shape (`mean_grad` per silo, no clip, no noise).

Every variant draws its minibatches and noise from the same per-(seed, silo, round, stream)
generators, so (a) and (b) must produce the same update; the benchmark checks that first.

Data: MNIST training images from ``$DPFL_DATA_DIR/mnist/`` (IDX, gzip) reduced to 50
dimensions by PCA (numpy SVD) and dealt to 25 silos of 2,400 records; random data of the
same shape when ``DPFL_DATA_DIR`` is unset. Model: MLP 50→64→10. K = 606 (the ISRL-DP
paper's MNIST batch for R = 25, n = 1238).

Usage: python benchmarks/engine.py [--repeats N] [--threads T] [--no-write]
Exits 1 when a target below is missed.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import os
import platform
import resource
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from benchmarks.report import interleaved_medians, print_headline, publish
from dpfl.engine import (
    NOISE_STREAM,
    SAMPLING_STREAM,
    ParamLayout,
    SiloBatch,
    clipped_grad_sum,
    gaussian_noise,
    mean_grad,
    sample_without_replacement,
    silo_generator,
)
from dpfl.models import build_model

CONFIG = {
    "num_silos": 25,
    "records_per_silo": 2400,
    "batch_size": 606,
    "features": 50,
    "hidden": [64],
    "num_classes": 10,
    "clip": 1.0,
    "noise_multiplier": 1.0,
    "learning_rate": 0.1,
    "seed": 0,
    "warmup": 3,
    "repeats": 25,
}
TARGET_SPEEDUP = 10.0  # loop time / vectorised time, at least
TARGET_DP_OVERHEAD = 1.5  # vectorised DP time / non-private time, at most
TITLE = "Engine: one ISRL-DP MB-SGD round"  # the section of docs/benchmarks.md
Round = Callable[[torch.Tensor, int], torch.Tensor]


def load_features(data_dir: str | None) -> tuple[np.ndarray, np.ndarray, str]:
    """Returns (features [N, 50] float32, labels [N] int64, description of the data)."""
    n = CONFIG["num_silos"] * CONFIG["records_per_silo"]
    if data_dir is None:
        rng = np.random.default_rng(CONFIG["seed"])
        x = rng.standard_normal((n, CONFIG["features"]), dtype=np.float32)
        y = rng.integers(0, CONFIG["num_classes"], n)
        return x, y, "random N(0, 1) features (DPFL_DATA_DIR unset)"
    folder = Path(data_dir) / "mnist"
    pixels = _idx(folder / "train-images-idx3-ubyte.gz").reshape(-1, 28 * 28)[:n]
    labels = _idx(folder / "train-labels-idx1-ubyte.gz")[:n].astype(np.int64)
    # PCA through the SVD of the 784×784 scatter matrix (same components as the SVD of the data,
    # far cheaper), accumulated in chunks so that loading never dominates the peak RSS.
    chunks = [slice(i, i + 5000) for i in range(0, len(pixels), 5000)]
    mean = pixels.mean(axis=0, dtype=np.float64) / 255.0
    scatter = np.zeros((784, 784))
    for rows in chunks:
        centred = pixels[rows] / 255.0 - mean
        scatter += centred.T @ centred
    _, _, vt = np.linalg.svd(scatter)
    components = vt[: CONFIG["features"]].T
    x = np.concatenate([(pixels[rows] / 255.0 - mean) @ components for rows in chunks]).astype(np.float32)
    x /= x[:, 0].std()
    return x, labels, f"MNIST train, first {n} images, PCA-{CONFIG['features']}"


def _idx(path: Path) -> np.ndarray:
    """Returns the array stored in an IDX file (LeCun's MNIST format)."""
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(tuple(int(d) for d in dims))


def make_rounds(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Round], torch.Tensor]:
    """Returns the round functions by name, and the initial flat parameters [P]."""
    num_silos, n, _ = x.shape
    k, clip, seed, lr = CONFIG["batch_size"], CONFIG["clip"], CONFIG["seed"], CONFIG["learning_rate"]
    noise_std = CONFIG["noise_multiplier"] * clip / k  # std of a silo's released mean gradient
    model = build_model(
        "mlp",
        input_shape=(x.shape[2],),
        num_classes=CONFIG["num_classes"],
        hidden=CONFIG["hidden"],
        seed=seed,
    )
    layout = ParamLayout.of(model)
    silos = list(range(num_silos))
    all_x, all_y = x.reshape(num_silos * n, -1), y.reshape(-1)

    def minibatch(r: int) -> SiloBatch:
        # Silo s's records are rows s·n … s·n + n − 1 of all_x.
        index = [
            s * n + sample_without_replacement(n, k, silo_generator(seed, s, r, SAMPLING_STREAM))
            for s in silos
        ]
        return SiloBatch.from_indices(all_x, all_y, index)

    def vectorised(w: torch.Tensor, r: int) -> torch.Tensor:
        clipped = clipped_grad_sum(model, layout, w, minibatch(r), clip=clip)
        messages = clipped.sum.div_(k).add_(
            gaussian_noise((layout.size,), noise_std, seed=seed, silos=silos, round=r, stream=NOISE_STREAM)
        )
        return w - lr * messages.mean(dim=0)

    def non_private(w: torch.Tensor, r: int) -> torch.Tensor:
        return w - lr * mean_grad(model, layout, w, minibatch(r)).mean(dim=0)

    def sample_loss(params: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, params, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))

    def loop_torch_func(w: torch.Tensor, r: int) -> torch.Tensor:
        total = torch.zeros_like(w)
        params = layout.unflatten(w)
        for s in silos:
            index = sample_without_replacement(n, k, silo_generator(seed, s, r, SAMPLING_STREAM))
            grads = per_sample(params, x[s, index], y[s, index])
            flat = torch.cat([grads[name].reshape(k, -1) for name in layout.names], dim=1)
            factors = clip / flat.norm(dim=1).clamp(min=clip)
            message = (factors.unsqueeze(1) * flat).sum(0) / k
            noise = torch.randn(layout.size, generator=silo_generator(seed, s, r, NOISE_STREAM)) * noise_std
            total += message + noise
        return w - lr * total / num_silos

    rounds = {"vectorised": vectorised, "non_private": non_private, "loop_torch_func": loop_torch_func}
    try:
        from opacus import GradSampleModule  # optional reference dependency
    except ImportError:
        print("note: opacus is not importable; skipping the Opacus per-silo loop")
        return rounds, layout.flatten_module(model)

    silo_model = build_model(
        "mlp",
        input_shape=(x.shape[2],),
        num_classes=CONFIG["num_classes"],
        hidden=CONFIG["hidden"],
        seed=seed,
    )
    gsm = GradSampleModule(silo_model, loss_reduction="sum")
    # The inputs need no gradient; Opacus's hooks still fire, and PyTorch says so every round.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")

    def loop_opacus(w: torch.Tensor, r: int) -> torch.Tensor:
        total = torch.zeros_like(w)
        for s in silos:
            layout.load_into(silo_model, w)  # each silo starts from the server's model
            gsm.zero_grad(set_to_none=True)
            index = sample_without_replacement(n, k, silo_generator(seed, s, r, SAMPLING_STREAM))
            F.cross_entropy(gsm(x[s, index]), y[s, index], reduction="sum").backward()
            flat = torch.cat([p.grad_sample.reshape(k, -1) for p in silo_model.parameters()], dim=1)
            factors = clip / flat.norm(dim=1).clamp(min=clip)
            message = (factors.unsqueeze(1) * flat).sum(0) / k
            noise = torch.randn(layout.size, generator=silo_generator(seed, s, r, NOISE_STREAM)) * noise_std
            total += message + noise
        return w - lr * total / num_silos

    rounds["loop_opacus"] = loop_opacus
    return rounds, layout.flatten_module(model)


def time_rounds(rounds: dict[str, Round], w0: torch.Tensor) -> dict[str, float]:
    """Returns the median wall-clock seconds per round of each variant."""
    for fn in rounds.values():
        for r in range(CONFIG["warmup"]):
            fn(w0, r)
    return interleaved_medians(
        {name: functools.partial(fn, w0) for name, fn in rounds.items()},
        CONFIG["repeats"],
        first=CONFIG["warmup"],
    )


def measure_memory(names: list[str], data: Path, threads: int) -> dict[str, tuple[float, float]]:
    """Returns (peak RSS, growth over set-up) in MiB per variant, each run in a fresh process.

    A fresh process per variant, because the peak RSS is a high-water mark: in one process
    the first variant's peak would hide the others'.
    """
    out = {}
    for name in names:
        child = subprocess.run(
            [sys.executable, __file__, "--memory-of", name, "--data", str(data), "--threads", str(threads)],
            capture_output=True,
            text=True,
            check=True,
        )
        peak, growth = child.stdout.split()[-2:]
        out[name] = float(peak), float(growth)
    return out


def _memory_of(name: str, data: Path) -> None:
    """Prints the peak RSS of warm-up rounds of one variant and its growth over set-up, in MiB."""
    x, y = _load_tensors(data)
    rounds, w0 = make_rounds(x, y)
    before = _peak_rss_mib()
    for r in range(CONFIG["warmup"]):
        rounds[name](w0, r)
    print(f"{_peak_rss_mib():.1f} {_peak_rss_mib() - before:.1f}")


def _load_tensors(data: Path) -> tuple[torch.Tensor, torch.Tensor]:
    arrays = np.load(data)
    shape = (CONFIG["num_silos"], CONFIG["records_per_silo"])
    return (
        torch.from_numpy(arrays["x"]).reshape(*shape, -1).contiguous(),
        torch.from_numpy(arrays["y"]).reshape(shape).contiguous(),
    )


def _peak_rss_mib() -> float:
    """Returns this process's peak resident set size in MiB."""
    # On Linux, getrusage's ru_maxrss keeps the parent's peak across fork and exec, so a child
    # started from a large parent reports at least the parent's size; the kernel's per-process
    # high-water mark VmHWM does not.
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def render(
    times: dict[str, float], memory: dict[str, tuple[float, float]], data: str, agreement: float
) -> tuple[str, bool]:
    """Returns the markdown section's body and whether every target is met."""
    loops = {name: t for name, t in times.items() if name.startswith("loop_")}
    reference = min(loops, key=loops.get)
    speedup = loops[reference] / times["vectorised"]
    overhead = times["vectorised"] / times["non_private"]
    ok = speedup >= TARGET_SPEEDUP and overhead <= TARGET_DP_OVERHEAD
    labels = {
        "vectorised": "(a) engine, all silos batched (ghost clipping)",
        "loop_torch_func": "(b) per-silo loop, torch.func vmap",
        "loop_opacus": "(b) per-silo loop, Opacus GradSampleModule",
        "non_private": "(c) engine, non-private MB-SGD",
    }
    lines = [
        f"{CONFIG['num_silos']} silos × {CONFIG['records_per_silo']} records, "
        f"batch K = {CONFIG['batch_size']} per silo, "
        f"MLP {CONFIG['features']}→{'→'.join(map(str, CONFIG['hidden']))}→{CONFIG['num_classes']}, "
        f"clip C = {CONFIG['clip']}, noise multiplier {CONFIG['noise_multiplier']}. Data: {data}. "
        f"Median of {CONFIG['repeats']} rounds after {CONFIG['warmup']} warm-up rounds, "
        "variants interleaved in a fresh order each repeat.",
        "",
        "| variant | ms / round | peak RSS (MiB) | RSS growth in rounds (MiB) |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {labels[name]} | {times[name] * 1e3:.2f} | {memory[name][0]:.0f} | {memory[name][1]:.1f} |"
        for name in labels
        if name in times
    ]
    lines += [
        "",
        "| measure | value | target | met |",
        "|---|---:|---:|:-:|",
        f"| speedup = loop ({labels[reference][4:]}) / engine | {speedup:.1f}× | ≥ {TARGET_SPEEDUP:g}× | "
        f"{'yes' if speedup >= TARGET_SPEEDUP else '**no**'} |",
        f"| DP overhead = engine DP / engine non-private | {overhead:.2f}× | ≤ {TARGET_DP_OVERHEAD:g}× | "
        f"{'yes' if overhead <= TARGET_DP_OVERHEAD else '**no**'} |",
        f"| max abs. difference of the engine's and the loops' updates | {agreement:.1e} | — | — |",
        "",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__} "
        f"with {torch.get_num_threads()} intra-op threads. Peak RSS: each variant in a fresh process "
        "(data and model set up, then the warm-up rounds); growth: the rounds' part of it.",
        "",
    ]
    return "\n".join(lines), ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=CONFIG["repeats"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch intra-op threads")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # child mode of measure_memory
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    CONFIG["repeats"] = args.repeats
    torch.set_num_threads(args.threads)
    if args.memory_of:
        _memory_of(args.memory_of, args.data)
        return 0

    features, labels, description = load_features(os.environ.get("DPFL_DATA_DIR"))
    order = np.random.default_rng(CONFIG["seed"]).permutation(len(labels))
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "silos.npz"
        np.savez(data, x=features[order], y=labels[order])
        del features, labels
        x, y = _load_tensors(data)
        rounds, w0 = make_rounds(x, y)

        expected = rounds["vectorised"](w0, 0)
        loops = [name for name in rounds if name.startswith("loop_")]
        agreement = max(float((rounds[name](w0, 0) - expected).abs().max()) for name in loops)
        if agreement > 1e-5:
            print(f"error: the per-silo loops disagree with the engine by {agreement:.2e}", file=sys.stderr)
            return 1
        times = time_rounds(rounds, w0)
        memory = measure_memory(list(rounds), data, args.threads)

    body, ok = render(times, memory, description, agreement)
    publish(TITLE, body, write=not args.no_write)
    if not ok:
        print("error: a target is missed (see the table above)", file=sys.stderr)
    loops = {name: t for name, t in times.items() if name.startswith("loop_")}
    reference = min(loops, key=loops.get)  # the faster loop, as in render
    speedup = loops[reference] / times["vectorised"]
    overhead = times["vectorised"] / times["non_private"]
    print_headline(
        "engine",
        headline=f"{speedup:.1f}× faster than the per-silo loop ({reference.removeprefix('loop_')}); "
        f"DP overhead {overhead:.2f}× non-private",
        target=f"≥ {TARGET_SPEEDUP:g}×; ≤ {TARGET_DP_OVERHEAD:g}×",
        met=ok,
        speedup=speedup,
        dp_overhead=overhead,
        ms_per_round={name: t * 1e3 for name, t in times.items()},
        peak_rss_mib={name: peak for name, (peak, _) in memory.items()},
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

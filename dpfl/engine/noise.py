"""Randomness that does not depend on how silos are batched, ordered or chunked.

Every random draw of a run belongs to one (seed, silo, round, stream) and comes from its own
`torch.Generator`, seeded from a hash of those four integers. So silo 7's noise in round 3
is the same whether silo 7 is simulated alone, first, last, or in a chunk of 5 — a run's
numbers change only when its seed does. ``stream`` separates independent uses within a
round (the noise, the minibatch sample, ...); the constants below name the engine's own.

The hash is BLAKE2b of the integers' decimal text, so the mapping is the same on every
machine and Python version (Python's built-in ``hash`` is salted per process for strings).

The generators are CPU generators on every device (`dpfl.device`): draws are made on the CPU and
moved to the device, so a run's noise and samples do not depend on where it computes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

__all__ = [
    "MODEL_STREAM",
    "NOISE_STREAM",
    "SAMPLING_STREAM",
    "gaussian_noise",
    "generator_seed",
    "model_draws",
    "on_default_device",
    "sample_without_replacement",
    "silo_generator",
]

NOISE_STREAM = 0
"""Stream of the Gaussian noise a silo adds to what it releases."""

SAMPLING_STREAM = 1
"""Stream of a silo's minibatch (or record) sampling."""

MODEL_STREAM = 0xD0
"""Stream of the draws a model makes in its forward pass (dropout masks): the run's, no silo's
(silo −1), from the global generator (`model_draws`)."""


def generator_seed(seed: int, silo: int, round: int, stream: int) -> int:
    """Returns the 63-bit seed of the generator of (seed, silo, round, stream)."""
    text = f"dpfl:{int(seed)}:{int(silo)}:{int(round)}:{int(stream)}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def silo_generator(seed: int, silo: int, round: int, stream: int) -> torch.Generator:
    """Returns a fresh CPU generator for one silo's draws of one kind in one round."""
    return torch.Generator().manual_seed(generator_seed(seed, silo, round, stream))


def gaussian_noise(
    shape_per_silo: Sequence[int],
    std: float | Sequence[float] | torch.Tensor,
    *,
    seed: int,
    silos: Sequence[int],
    round: int,
    stream: int = NOISE_STREAM,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Returns independent N(0, std²) noise for each listed silo, stacked as [S, *shape_per_silo].

    Row k is drawn from ``silo_generator(seed, silos[k], round, stream)`` alone, so it is the
    same for silo ``silos[k]`` whatever the other silos listed and their order.

    Args:
        shape_per_silo: shape of one silo's noise, e.g. ``(P,)``.
        std: the noise standard deviation (``noise_std``, not the multiplier), one value for
            all silos or one per listed silo; ≥ 0.
        silos: the silos' global ids (not their positions in the batch).
    """
    silo_ids = [int(s) for s in silos]
    stds = [float(v) for v in torch.as_tensor(std, dtype=torch.float64).reshape(-1).tolist()]
    if len(stds) not in (1, len(silo_ids)) or not all(math.isfinite(v) and v >= 0 for v in stds):
        raise ValueError(f"std must be one finite value ≥ 0 or one per silo ({len(silo_ids)}); got {std!r}")
    out = torch.empty(len(silo_ids), *shape_per_silo, dtype=dtype, device="cpu")
    for row, silo in zip(out, silo_ids, strict=True):
        # Standard normals first, scaled below: a silo's noise at any std is proportional to
        # its noise at std 1, which keeps runs that differ only in σ comparable draw by draw.
        row.normal_(0.0, 1.0, generator=silo_generator(seed, silo, round, stream))
    if len(stds) == 1:
        out.mul_(stds[0])
    else:
        out.mul_(torch.tensor(stds, dtype=dtype, device="cpu").view(-1, *([1] * len(shape_per_silo))))
    return on_default_device(out)


@contextmanager
def model_draws(seed: int, round: int, device: torch.device | str | None = None) -> Iterator[None]:
    """Runs the block with the global generator forked and seeded from (seed, −1, round,
    `MODEL_STREAM`), the caller's left as it was.

    For a model whose forward pass draws (dropout in training mode): ``vmap`` with
    ``randomness="different"`` draws its masks from the global generator, and no other. `seed` is
    the run's `noise_key` (`Algorithm.noise_key`): the spec's seed in simulation, a secret in a
    protected run, so the masks are the mechanism's own coins like its sampling and noise, drawn
    apart from the data (each sample's masks by its slot in the batch, whatever the records hold).
    `device`: where the masks are drawn (default: where tensors are created now, `dpfl.device.placed`);
    a CUDA device's generator is forked and seeded too.
    """
    where = torch.device(device) if device is not None else torch.get_default_device()
    devices = [where] if where.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(generator_seed(seed, -1, round, MODEL_STREAM))
        yield


def sample_without_replacement(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """Returns k distinct indices drawn uniformly from range(n), in random order, int64 [k]."""
    if not 0 <= k <= n:
        raise ValueError(f"cannot sample k={k} distinct indices from n={n} records; need 0 ≤ k ≤ n")
    return on_default_device(torch.randperm(n, generator=generator, device="cpu")[:k])


def on_default_device(drawn: torch.Tensor) -> torch.Tensor:
    """Returns a CPU draw on the device tensors are created on now (`dpfl.device.placed`)."""
    device = torch.get_default_device()
    return drawn if device.type == "cpu" else drawn.to(device)

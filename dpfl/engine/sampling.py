"""Which records each silo uses in a round, drawn from its own generator, as one SiloBatch.

Each silo's draw comes from `silo_generator(seed, silo, round, SAMPLING_STREAM)`, so a silo's
batch does not depend on which other silos take part or in what order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dpfl.engine.batch import SiloBatch
from dpfl.engine.noise import SAMPLING_STREAM, silo_generator

__all__ = ["minibatches", "poisson_batch"]


def poisson_batch(
    x: torch.Tensor,
    y: torch.Tensor,
    silo_indices: Sequence[torch.Tensor],
    *,
    silos: Sequence[int],
    rates: Sequence[float],
    seed: int,
    round: int,
) -> SiloBatch:
    """Returns a Poisson sample of each listed silo's records: each kept with probability q.

    Poisson sampling is what the accountants' sub-sampled Gaussian assumes (add/remove-one
    neighbours), so the ledger's ε is exact for the batches actually used.
    """
    rows = []
    for silo, q in zip(silos, rates, strict=True):
        idx = silo_indices[silo]
        keep = torch.rand(len(idx), generator=silo_generator(seed, int(silo), round, SAMPLING_STREAM)) < q
        rows.append(idx[keep])
    return SiloBatch.from_indices(x, y, rows)


def minibatches(
    x: torch.Tensor,
    y: torch.Tensor,
    silo_indices: Sequence[torch.Tensor],
    *,
    silos: Sequence[int],
    batch_size: int,
    steps: int,
    seed: int,
    round: int,
) -> list[SiloBatch]:
    """Returns `steps` batches per silo, each `batch_size` records drawn without replacement.

    A silo with fewer records than `batch_size` uses all of them each step.
    """
    generators = [silo_generator(seed, int(s), round, SAMPLING_STREAM) for s in silos]
    out = []
    for _ in range(steps):
        rows = []
        for silo, gen in zip(silos, generators, strict=True):
            idx = silo_indices[silo]
            k = min(batch_size, len(idx))
            rows.append(idx[torch.randperm(len(idx), generator=gen)[:k]])
        out.append(SiloBatch.from_indices(x, y, rows))
    return out

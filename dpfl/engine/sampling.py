"""Which records each silo uses in a round, drawn from its own generator, as one SiloBatch.

Each silo's draw comes from `silo_generator(seed, silo, round, SAMPLING_STREAM)`, so a silo's
batch does not depend on which other silos take part or in what order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dpfl.engine.batch import SiloBatch
from dpfl.engine.noise import SAMPLING_STREAM, silo_generator

__all__ = ["minibatch_rows", "minibatches", "poisson_batch"]


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
    records = [silo_indices[s] for s in silos]
    sizes = torch.tensor([r.shape[0] for r in records])
    # one draw per record from its silo's own generator; the comparison and the selection are
    # done once for all silos
    draws = torch.cat(
        [
            torch.rand(r.shape[0], generator=silo_generator(seed, int(s), round, SAMPLING_STREAM))
            for s, r in zip(silos, records, strict=True)
        ]
    )
    keep = draws < torch.as_tensor(rates, dtype=draws.dtype).repeat_interleave(sizes)
    kept = torch.zeros(len(records), dtype=torch.long).index_add_(
        0, torch.arange(len(records)).repeat_interleave(sizes), keep.long()
    )
    return SiloBatch.from_concatenated(torch.as_tensor(x), torch.as_tensor(y), torch.cat(records)[keep], kept)


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
    index, sizes = minibatch_rows(
        silo_indices, silos=silos, batch_size=batch_size, steps=steps, seed=seed, round=round
    )
    return [SiloBatch.from_rows(x, y, index[step], sizes) for step in range(steps)]


def minibatch_rows(
    silo_indices: Sequence[torch.Tensor],
    *,
    silos: Sequence[int],
    batch_size: int,
    steps: int,
    seed: int,
    round: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the records of `minibatches`, unread: indices [steps, S, B] into the training set
    and each silo's batch size [S] (B the largest; a row past its silo's size is padding, 0)."""
    generators = [silo_generator(seed, int(s), round, SAMPLING_STREAM) for s in silos]
    sizes = torch.tensor([min(batch_size, len(silo_indices[s])) for s in silos], dtype=torch.long)
    index = torch.zeros(steps, len(silos), int(sizes.max()) if len(silos) else 0, dtype=torch.long)
    for step in range(steps):
        for j, (silo, gen) in enumerate(zip(silos, generators, strict=True)):
            idx, k = silo_indices[silo], int(sizes[j])
            index[step, j, :k] = idx[torch.randperm(len(idx), generator=gen)[:k]]
    return index, sizes

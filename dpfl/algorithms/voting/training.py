"""Non-private SGD of many models at once: the agents' local models and the server's student.

Neither training releases anything: an agent's local model never leaves the agent (only its
noisy votes do), and the student learns from labels that are already released (post-
processing). So plain SGD with momentum is enough; what matters is that S models train as
batched computations (`dpfl.engine.sgd_steps` over [s, P] stacks, in blocks that fit in the
cache), never in a Python loop over models.

Each model sees its records in epochs: a fresh permutation per epoch from its own
`silo_generator(seed, id, epoch, stream)`, cut into batches of `batch_size`. Models with fewer
records than the largest wrap around their permutation, so every model takes the same number
of steps per epoch; a model with no record takes zero gradients.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch, models_per_block, sgd_steps, silo_generator
from dpfl.engine.noise import sample_without_replacement

__all__ = ["minibatches", "train_sgd"]


def train_sgd(
    model: nn.Module,
    layout: ParamLayout,
    init: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    rows: Sequence[torch.Tensor],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float,
    seed: int,
    stream: int,
    ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """Returns S models [S, P] trained from `init` [S, P], model s on records `x[rows[s]]`, `y[rows[s]]`.

    Args:
        rows: one index tensor per model, into the first dimension of `x` and `y`.
        epochs, batch_size, lr, momentum: SGD with heavy-ball momentum, v ← μv + g, w ← w − ηv.
        seed, stream, ids: model s draws from `silo_generator(seed, ids[s], epoch, stream)`
            (ids default to 0..S−1), so a model's draws do not depend on the others.
    """
    if init.dim() != 2 or init.shape[0] != len(rows):
        raise ValueError(f"init must be [S, P] with S = {len(rows)} models; got shape {tuple(init.shape)}")
    ids = list(range(len(rows))) if ids is None else [int(i) for i in ids]
    w = init.detach().clone()
    sizes = torch.tensor([len(r) for r in rows], dtype=torch.long)
    width = int(sizes.max()) if len(rows) else 0
    if width == 0:
        return w
    # Models train independently, so they train in blocks that fit in the cache.
    size = models_per_block(layout.size, min(batch_size, width), x[0].numel())
    for first in range(0, len(rows), size):
        block = slice(first, min(first + size, len(rows)))
        steps = minibatches(
            x,
            y,
            rows[block],
            ids[block],
            width,
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            stream=stream,
        )
        w[block] = sgd_steps(model, layout, w[block], len(rows[block]), steps, lr=lr, momentum=momentum)
    return w


def minibatches(
    x: torch.Tensor,
    y: torch.Tensor,
    rows: Sequence[torch.Tensor],
    ids: Sequence[int],
    width: int,
    *,
    epochs: int,
    batch_size: int,
    seed: int,
    stream: int,
) -> Iterator[tuple[int, SiloBatch]]:
    """Yields each local step's (models, minibatch) of a block of models, epoch after epoch:
    ⌈width / B⌉ steps an epoch, `width` the most records of any model of the training (not
    only of this block), so a model's steps do not depend on its block."""
    span = torch.arange(batch_size)
    counts = torch.tensor([len(r) for r in rows], dtype=torch.long)
    mask = span.unsqueeze(0) < counts.unsqueeze(1)  # a model with fewer records than a batch uses each once
    for epoch in range(epochs):
        perms = torch.zeros(len(rows), width, dtype=torch.long)
        for k, (own, i) in enumerate(zip(rows, ids, strict=True)):
            if len(own):
                perms[k, : len(own)] = own[
                    sample_without_replacement(len(own), len(own), silo_generator(seed, i, epoch, stream))
                ]
        for step in range(math.ceil(width / batch_size)):
            # Positions wrap modulo each model's size, so all models step together.
            pos = (step * batch_size + span).unsqueeze(0) % counts.clamp(min=1).unsqueeze(1)
            index = perms.gather(1, pos)
            bx = x.index_select(0, index.reshape(-1)).view(*index.shape, *x.shape[1:])
            by = y.index_select(0, index.reshape(-1)).view(index.shape)
            yield len(rows), SiloBatch(bx, by, mask)

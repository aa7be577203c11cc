"""Non-private SGD of many models at once: the agents' local models and the server's student.

Neither training releases anything: an agent's local model never leaves the agent (only its
noisy votes do), and the student learns from labels that are already released (post-
processing). So plain SGD with momentum is enough; what matters is that S models train as
batched computations (`dpfl.engine.sgd_steps` over [s, P] stacks, in blocks that fit in the
cache), never in a Python loop over models.

Each model sees its records in epochs: a fresh permutation per epoch from its own
`silo_generator(seed, id, epoch, stream)`, cut into batches of `batch_size`, the last one short:
⌈n/B⌉ steps an epoch for a model of n records. A model's training reads its own records alone,
its number of steps included: when every model took as many steps as the largest, one record
added to the largest agent moved every agent's model, and so every agent's vote (a fuzzed
neighbour's histogram moved 3√2 where the ledger allows √2). A model with no record never steps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch, models_per_block, sgd_steps, silo_generator
from dpfl.engine.noise import sample_without_replacement

__all__ = ["largest_first", "minibatches", "train_sgd"]


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
    order = largest_first(rows)
    if not order or not len(rows[order[0]]):
        return w
    # Models train independently, so they train in blocks that fit in the cache.
    size = models_per_block(layout.size, min(batch_size, len(rows[order[0]])), x[0].numel())
    for first in range(0, len(order), size):
        block = order[first : first + size]
        steps = minibatches(
            x,
            y,
            [rows[s] for s in block],
            [ids[s] for s in block],
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            stream=stream,
        )
        w[block] = sgd_steps(model, layout, w[block], len(block), steps, lr=lr, momentum=momentum)
    return w


def largest_first(rows: Sequence[torch.Tensor]) -> list[int]:
    """Returns the models' indices, the most records first (ties in order): the models still
    stepping late in an epoch are then a prefix of a block, which is what `sgd_steps` steps."""
    return sorted(range(len(rows)), key=lambda s: -len(rows[s]))


def minibatches(
    x: torch.Tensor,
    y: torch.Tensor,
    rows: Sequence[torch.Tensor],
    ids: Sequence[int],
    *,
    epochs: int,
    batch_size: int,
    seed: int,
    stream: int,
) -> Iterator[tuple[int, SiloBatch]]:
    """Yields each local step's (active, minibatch) of a block of models, epoch after epoch: model
    s takes ⌈n_s / B⌉ steps an epoch over its own permutation, the last one short, and a step
    moves the first `active` models, those with records left this epoch (`rows` come largest
    first, see `largest_first`). The block's steps an epoch are its largest model's."""
    counts = torch.tensor([len(r) for r in rows], dtype=torch.long)
    if len(rows) > 1 and bool((counts[1:] > counts[:-1]).any()):
        raise ValueError(f"rows must come largest first; got sizes {counts.tolist()}")
    width = int(counts.max()) if len(rows) else 0
    own_steps = (counts + batch_size - 1) // batch_size
    span = torch.arange(batch_size)
    for epoch in range(epochs):
        perms = torch.zeros(len(rows), width, dtype=torch.long)
        for k, (own, i) in enumerate(zip(rows, ids, strict=True)):
            if len(own):
                perms[k, : len(own)] = own[
                    sample_without_replacement(len(own), len(own), silo_generator(seed, i, epoch, stream))
                ]
        for step in range(int(own_steps[0]) if width else 0):
            active = int((own_steps > step).sum())
            pos = step * batch_size + span
            mask = pos.unsqueeze(0) < counts[:active].unsqueeze(1)  # past a model's records: padding
            index = perms[:active].gather(1, pos.clamp(max=width - 1).expand(active, -1))
            bx = x.index_select(0, index.reshape(-1)).view(*index.shape, *x.shape[1:])
            by = y.index_select(0, index.reshape(-1)).view(index.shape)
            yield active, SiloBatch(bx, by, mask)

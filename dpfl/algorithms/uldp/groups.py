"""Groups of records trained as one model each, all groups at once: silos, or user–silo pairs.

ULDP-AVG trains one model copy per (silo, user) pair on that user's records in that silo;
FedAvg trains one per silo. Both are "many small datasets, one model each": `RecordGroups`
holds each group's record indices padded to a rectangle, and `local_sgd` runs Q epochs of
minibatch SGD on every group in one batched computation (the engine's `mean_grad` treats the
group axis like its silo axis). Groups are processed in blocks whose working set fits in the
CPU's cache (`dpfl.engine.blocks`); each group's epoch orders come from a hash of (seed, round,
epoch, silo, user), so results do not depend on the blocks or on the other groups.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from dpfl.data import UserAllocation
from dpfl.engine import ParamLayout, SiloBatch, models_per_block, sgd_steps
from dpfl.federation import FederatedData

__all__ = ["RecordGroups", "epoch_order", "local_deltas", "local_sgd"]


@dataclass(frozen=True)
class RecordGroups:
    """Training-record indices of G groups, padded: `index` [G, L], real where `position < count`.

    Attributes:
        index: int64 [G, L] indices into the training records; padding is index 0.
        count: int64 [G] records per group (≥ 1), in decreasing order.
        silo: int64 [G] the silo of each group.
        user: int64 [G] the user of each group, or -1 for whole-silo groups.
        run: int64 [G] the run of each group in a batch of runs (`concat`); 0 for one run's.
    """

    index: torch.Tensor
    count: torch.Tensor
    silo: np.ndarray
    user: np.ndarray
    run: np.ndarray = field(default=None)  # type: ignore[assignment]  # zeros, set after init

    def __post_init__(self) -> None:
        if self.run is None:
            object.__setattr__(self, "run", np.zeros(len(self.count), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.count)

    @classmethod
    def of_silos(cls, data: FederatedData, silos: np.ndarray) -> RecordGroups:
        """Returns one group per listed silo, holding all its records."""
        rows = [data.silos[int(s)] for s in silos]
        return cls._padded(rows, np.asarray(silos, dtype=np.int64), np.full(len(rows), -1, dtype=np.int64))

    @classmethod
    def of_users(
        cls,
        data: FederatedData,
        owners: UserAllocation,
        silos: np.ndarray,
        users: np.ndarray | None = None,
    ) -> RecordGroups:
        """Returns one group per (silo, user) pair with records, for the listed silos.

        Groups are ordered by silo, then user. `users` (bool [U]) keeps only those users.
        """
        rows, silo_of, user_of = [], [], []
        for s in silos:
            ids = owners.user_ids[int(s)]
            records = data.silos[int(s)].cpu().numpy()
            order = np.argsort(ids, kind="stable")
            present, starts = np.unique(ids[order], return_index=True)
            for u, part in zip(present, np.split(records[order], starts[1:]), strict=True):
                if users is None or users[u]:
                    rows.append(torch.as_tensor(part))
                    silo_of.append(int(s))
                    user_of.append(int(u))
        return cls._padded(rows, np.asarray(silo_of, dtype=np.int64), np.asarray(user_of, dtype=np.int64))

    @classmethod
    def concat(cls, parts: Sequence[RecordGroups]) -> RecordGroups:
        """Returns the groups of a batch of runs as one, largest first; `run` says whose each is.

        The runs' groups index the same training records (runs of a batch share the dataset).
        """
        width = max(part.index.shape[1] for part in parts)
        index = torch.cat([nn.functional.pad(part.index, (0, width - part.index.shape[1])) for part in parts])
        count = torch.cat([part.count for part in parts])
        order = np.argsort(-count.cpu().numpy(), kind="stable")
        run = np.concatenate([np.full(len(part), k, dtype=np.int64) for k, part in enumerate(parts)])
        silo = np.concatenate([part.silo for part in parts])
        user = np.concatenate([part.user for part in parts])
        return cls(index[order], count[order], silo[order], user[order], run[order])

    @classmethod
    def _padded(cls, rows: list[torch.Tensor], silo: np.ndarray, user: np.ndarray) -> RecordGroups:
        # Largest groups first: a block then holds groups of similar size, and at every local
        # step the groups that still have records form a prefix of the block.
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        order = np.argsort(-sizes, kind="stable")
        width = int(sizes.max()) if len(rows) else 1
        index = torch.zeros(len(rows), width, dtype=torch.long)
        for g, i in enumerate(order):
            index[g, : sizes[i]] = rows[i]
        return cls(index, torch.as_tensor(sizes[order]), silo[order], user[order])

    def blocks(self, data: FederatedData, *, params: int, batch_size: int) -> Iterator[slice]:
        """Yields slices of groups covering all groups in order, each as many groups as fit in
        the cache (`models_per_block`); results do not depend on them.

        Groups come largest first, so a block's first group bounds its minibatches, and blocks of
        users with few records hold more of them.

        Args:
            data: the records the groups index (for the size of one record).
            params: the model's parameter count P.
            batch_size: records per local step (a group's own count if smaller).
        """
        features = data.x_train[0].numel() if len(data.x_train) else 1
        start = 0
        while start < len(self):
            size = models_per_block(params, min(batch_size, int(self.count[start])), features)
            yield slice(start, min(start + size, len(self)))
            start += size

    def batch(self, data: FederatedData, rows: torch.Tensor, mask: torch.Tensor) -> SiloBatch:
        """Returns the SiloBatch of training records `rows` [G, B] (indices), masked by `mask`."""
        x, y = _gather(data, rows.reshape(-1), mask.reshape(-1))
        return SiloBatch(x.view(*rows.shape, *data.x_train.shape[1:]), y.view(rows.shape), mask)


def _gather(
    data: FederatedData, rows: torch.Tensor, mask: torch.Tensor, *, scratch: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the training records `rows` [N] (indices) as (x [N, ...], y [N]), zero where `mask` is False.

    With `scratch`, the records are written into this thread's reusable buffers, valid until
    the next such call in the thread: a block's epoch of records is megabytes, and a fresh
    allocation of that size costs as much in page faults as the gather itself (2.8 ms
    against 0.8 ms for 2,750 MNIST records).
    """
    if scratch:
        x = torch.index_select(data.x_train, 0, rows, out=_SCRATCH.take("x", data.x_train, len(rows)))
        y = torch.index_select(data.y_train, 0, rows, out=_SCRATCH.take("y", data.y_train, len(rows)))
    else:
        x = data.x_train.index_select(0, rows)
        y = data.y_train.index_select(0, rows)
    padding = torch.nonzero(~mask).squeeze(1)
    if len(padding):  # zero the padding rows in place; a boolean mask would visit every entry
        x.index_fill_(0, padding, 0)
        y.index_fill_(0, padding, 0)
    return x, y


class _Buffers(threading.local):
    """Per-thread buffers `_gather(scratch=True)` gathers records into, grown as needed
    up to `KEPT_BYTES`; larger batches get fresh tensors, so a worker thread never holds more
    (FedAvg's ten MNIST silos in one block are 188 MB of records)."""

    KEPT_BYTES = 64 * 2**20

    def __init__(self) -> None:
        self.flat: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def take(self, slot: str, like: torch.Tensor, rows: int) -> torch.Tensor:
        """Returns a [rows, *like.shape[1:]] tensor of like's dtype and device over this thread's
        buffer `slot`."""
        shape = (rows, *like.shape[1:])
        numel = math.prod(shape)
        if numel * like.element_size() > self.KEPT_BYTES:
            return torch.empty(shape, dtype=like.dtype, device=like.device)
        key = (slot, like.dtype, like.device)
        buffer = self.flat.get(key)
        if buffer is None or buffer.numel() < numel:
            buffer = self.flat[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
        return buffer[:numel].view(shape)


_SCRATCH = _Buffers()


def epoch_order(
    groups: RecordGroups, block: slice, *, seed: int | Sequence[int], round: int, epoch: int
) -> torch.Tensor:
    """Returns a uniformly random order of each group's real positions, [G_block, max count].

    Real positions (< count) come first in random order; padding follows. A group's order
    depends only on (seed, round, epoch, silo, user): not on which other groups exist, so a
    user's local training is the same whoever else takes part (neighbouring datasets differ
    only in that user's contribution), and in a batch of runs (`seed` per run) the same as
    alone. Keys are a counter-based hash (SplitMix64), computed for all groups at once.
    """
    count = groups.count[block]
    width = int(count.max())
    # Python ints: an entropy seed has 128 bits, which `_splitmix` folds to 64
    seeds = [seed] if isinstance(seed, int) else [int(s) for s in seed]
    bases = torch.as_tensor([_signed(_splitmix(_splitmix(_splitmix(s) ^ round) ^ epoch)) for s in seeds])
    silo = torch.as_tensor(groups.silo[block], dtype=torch.long)
    user = torch.as_tensor(groups.user[block], dtype=torch.long)
    base = bases[torch.as_tensor(groups.run[block], dtype=torch.long)]
    group_key = _mix(base ^ _mix(silo * 1_000_003 + user))
    keys = _mix(group_key[:, None] + torch.arange(width)[None, :] * _signed(_GOLDEN))
    keys.masked_fill_(torch.arange(width)[None, :] >= count[:, None], torch.iinfo(torch.long).max)
    return keys.argsort(dim=1)


_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _splitmix(value: int) -> int:
    """SplitMix64's finaliser on a Python int (mod 2^64)."""
    z = (value + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser on int64 tensors (wrapping multiplication, logical shifts)."""
    x = x + _signed(_GOLDEN)
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * _signed(_M1)
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * _signed(_M2)
    return x ^ ((x >> 31) & ((1 << 33) - 1))


def local_sgd(
    model: nn.Module,
    layout: ParamLayout,
    w: torch.Tensor,
    data: FederatedData,
    groups: RecordGroups,
    block: slice,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int | Sequence[int],
    round: int,
) -> torch.Tensor:
    """Returns each group's model [G_block, P] after `epochs` epochs of minibatch SGD from w.

    w is one model [P] for every group, or each group's own start [G_block, P] (a batch of
    runs, `seed` then one per run). An epoch visits the group's records once in a fresh random
    order, in ⌈count/B⌉ steps of up to B records (the last may be smaller), as a DataLoader
    with shuffle does. Each step computes only the groups that still have records in it
    (`dpfl.engine.local.sgd_steps`).
    """
    steps = _steps(data, groups, block, epochs, batch_size, seed, round)
    return sgd_steps(model, layout, w, len(groups.count[block]), steps, lr=lr)


def _steps(
    data: FederatedData,
    groups: RecordGroups,
    block: slice,
    epochs: int,
    batch_size: int,
    seed: int | Sequence[int],
    round: int,
) -> Iterator[tuple[int, SiloBatch]]:
    """Yields each local step's (number of groups still training, their minibatch)."""
    count = groups.count[block]
    width = int(count.max())
    index = groups.index[block, :width]
    real = torch.arange(width)[None, :] < count[:, None]  # an epoch's order puts a group's records first
    starts = list(range(0, width, batch_size))
    # groups still training at each step: a prefix, as counts decrease along the block
    actives = (count[None, :] > torch.tensor(starts)[:, None]).sum(1).tolist()
    # Each step's [active, B] cells of the block's [G, width] grid, packed step after step: an
    # epoch gathers only those records. With 100 zipf MNIST users a sixth of the grid's cells
    # (12,483 of 74,762) belong to groups that have stopped, and the largest block's grid was
    # 70 MB, past the reused buffers.
    cells = [
        (torch.arange(active)[:, None] * width + torch.arange(start, min(start + batch_size, width))).view(-1)
        for start, active in zip(starts, actives, strict=True)
    ]
    sizes = [len(c) for c in cells]
    cells = torch.cat(cells)
    mask = real.reshape(-1)[cells]
    for epoch in range(epochs):
        order = epoch_order(groups, block, seed=seed, round=round, epoch=epoch)
        # the epoch's records read once; each step is a view of them (tiny models: per-step
        # gathers cost more than the step)
        x, y = _gather(data, index.gather(1, order).reshape(-1)[cells], mask, scratch=True)
        offset = 0
        for active, size in zip(actives, sizes, strict=True):
            cols = size // active
            step = slice(offset, offset + size)
            offset += size
            features = x[step].view(active, cols, *x.shape[1:])
            yield active, SiloBatch(features, y[step].view(active, cols), mask[step].view(active, cols))


def local_deltas(
    algorithm,
    groups: RecordGroups,
    block: slice,
    round: int,
    *,
    start: torch.Tensor | None = None,
    seeds: Sequence[int] | None = None,
) -> torch.Tensor:
    """Returns each group's model delta after `algorithm`'s local epochs from its model, [G_block, P].

    `algorithm` has the model, layout, data, spec and current model `w`, and params
    `local_epochs`, `batch_size` and `local_lr` (FedAvg's two-rate DEFAULT, ULDP-AVG). In a
    batch of runs, `start` is each group's run's model [G_block, P] and `seeds` the runs' seeds.
    """
    p = algorithm.params
    w = algorithm.w if start is None else start
    local = local_sgd(
        algorithm.model,
        algorithm.layout,
        w,
        algorithm.data,
        groups,
        block,
        epochs=p.local_epochs,
        batch_size=p.batch_size,
        lr=p.local_lr,
        seed=algorithm.noise_key if seeds is None else seeds,
        round=round,
    )
    return local.sub_(w)

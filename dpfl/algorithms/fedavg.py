"""FedAvg (McMahan et al. 2017): the non-private reference line of every comparison."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput, participants
from dpfl.engine import SiloBatch, models_per_block, sgd_steps, stack_copies
from dpfl.engine.sampling import minibatch_rows

__all__ = ["FedAvg", "local_sgd", "local_sgd_many"]


class FedAvgParams(Params):
    lr: float = Field(0.1, gt=0, le=100, description="local learning rate")
    local_steps: int = Field(5, ge=1, le=1000, description="local SGD steps per round")
    batch_size: int = Field(32, ge=1, le=100_000, description="records per local step")


@ALGORITHMS.register("fedavg")
class FedAvg(Algorithm):
    """Each silo takes `local_steps` SGD steps from the server's model; the server averages
    the results weighted by silo size. All silos' local steps run as one batched computation."""

    Params = FedAvgParams
    notion = "none"
    paper = "McMahan et al. 2017 (non-private reference)"
    summary = "non-private federated averaging"

    def setup(self, noise_multiplier) -> None:
        self.w = self.layout.flatten_module(self.model).detach().clone()

    def round(self, r: int) -> RoundOutput:
        p = self.params
        silos = participants(self.spec, r, self.noise_key)
        local = local_sgd(self, silos, r, lr=p.lr, batch_size=p.batch_size, steps=p.local_steps)
        sizes = torch.as_tensor(self.data.silo_sizes[silos], dtype=local.dtype)
        self.w = (sizes[:, None] * local).sum(0) / sizes.sum()
        return RoundOutput()

    @property
    def global_params(self) -> torch.Tensor:
        return self.w


def local_sgd(
    algorithm: Algorithm, silos: np.ndarray, r: int, *, lr: float, batch_size: int, steps: int
) -> torch.Tensor:
    """Returns the silos' models [len(silos), P] after `steps` minibatch SGD steps from the
    server's `algorithm.w`, all silos at once: FedAvg's local update, which its variants share
    (DP-FedAvg clips and noises what comes out of it). Batches are drawn from (seed, round)."""
    return local_sgd_many([algorithm], [silos], r, lr=lr, batch_size=batch_size, steps=steps)[0]


def local_sgd_many(
    algorithms: Sequence[Algorithm],
    silos: Sequence[np.ndarray],
    r: int,
    *,
    lr: float,
    batch_size: int,
    steps: int,
) -> list[torch.Tensor]:
    """Returns `local_sgd` of several runs of one model and data (a batch of runs), their silos'
    models as rows of one gradient call a step; each run draws its batches from its own seed."""
    rows = [len(chosen) for chosen in silos]
    start = torch.cat([stack_copies(a.w, n) for a, n in zip(algorithms, rows, strict=True)])
    if not len(start):  # no run has a silo this round
        return list(start.split(rows))
    # each run's silos' minibatches as indices into its own records, read block by block below
    drawn = [
        minibatch_rows(
            a.data.silos, silos=chosen, batch_size=batch_size, steps=steps, seed=a.noise_key, round=r
        )
        for a, chosen in zip(algorithms, silos, strict=True)
    ]
    first = algorithms[0]
    # The silos' models train independently: in blocks that fit in the cache (`models_per_block`).
    width = max(index.shape[2] for index, _ in drawn)
    size = models_per_block(first.layout.size, width, first.data.x_train[0].numel())
    local = torch.empty_like(start)
    for lo in range(0, len(start), size):
        block = slice(lo, min(lo + size, len(start)))
        batches = _block_batches(algorithms, drawn, block, steps)
        local[block] = sgd_steps(first.model, first.layout, start[block], block.stop - lo, batches, lr=lr)
    return list(local.split(rows))


def _block_batches(
    algorithms: Sequence[Algorithm],
    drawn: Sequence[tuple[torch.Tensor, torch.Tensor]],
    block: slice,
    steps: int,
) -> Iterator[tuple[int, SiloBatch]]:
    """Yields each step's minibatch of a block of rows, the rows of all runs in order, each run's
    read from its own records (`drawn`: each run's minibatch indices and sizes)."""
    parts, lo = [], 0  # (run's data, its indices and sizes, its rows in the block)
    for a, (index, sizes) in zip(algorithms, drawn, strict=True):
        hi = lo + len(sizes)
        if max(lo, block.start) < min(hi, block.stop):
            own = slice(max(lo, block.start) - lo, min(hi, block.stop) - lo)
            parts.append((a.data, index[:, own], sizes[own]))
        lo = hi
    for step in range(steps):
        batches = [
            SiloBatch.from_rows(data.x_train, data.y_train, index[step], sizes)
            for data, index, sizes in parts
        ]
        yield block.stop - block.start, batches[0] if len(batches) == 1 else SiloBatch.concat(batches)

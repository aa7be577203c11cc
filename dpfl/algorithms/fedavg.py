"""FedAvg (McMahan et al. 2017): the non-private reference line of every comparison."""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput, participants
from dpfl.engine import mean_grad, stack_copies
from dpfl.engine.sampling import minibatches

__all__ = ["FedAvg", "local_sgd"]


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
        silos = participants(self.spec, r)
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
    local = stack_copies(algorithm.w, len(silos))
    for batch in minibatches(
        algorithm.data.x_train,
        algorithm.data.y_train,
        algorithm.data.silos,
        silos=silos,
        batch_size=batch_size,
        steps=steps,
        seed=algorithm.spec.seed,
        round=r,
    ):
        local -= lr * mean_grad(algorithm.model, algorithm.layout, local, batch)
    return local

"""AE-DPFL (reference/003_voting_dpfl.md §2.1, Algorithm 2): agents' local models vote one-hot.

Every agent trains the spec's model on its own records (all agents at once, one [N, P]
stack), then predicts a label for each public query; the summed one-hot votes go through the
noisy argmax. The local models never leave the agents, so their training is not a release.
Sensitivity: 1 at agent level, √2 at instance level (one record can flip an agent's label).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.voting.base import VotingAlgorithm, VotingParams
from dpfl.algorithms.voting.training import train_sgd
from dpfl.algorithms.voting.votes import one_hot_votes, predicted_labels
from dpfl.engine import stack_copies

__all__ = ["AEDPFL", "AEParams"]

LOCAL_STREAM = 8
"""Stream of the agents' local minibatch order."""


class AEParams(VotingParams):
    local_epochs: int = Field(10, ge=1, le=1000, description="epochs of each agent's local model")
    local_lr: float = Field(0.05, gt=0, le=10, description="local learning rate (SGD with momentum)")
    local_batch_size: int = Field(32, ge=1, le=100_000, description="local minibatch size")
    local_momentum: float = Field(0.9, ge=0, lt=1, description="local momentum")


@ALGORITHMS.register("ae_dpfl")
class AEDPFL(VotingAlgorithm):
    """AE-DPFL: a noisy-argmax vote of the agents' local models on public queries, then a student."""

    Params = AEParams
    method = "ae"
    notion = "agent"
    summary = "agents' local models vote on public queries; noisy argmax labels train the server's model"

    def vote_key(self) -> dict[str, Any]:
        p = self.params
        return {
            "model": self.spec.model.model_dump(mode="json"),
            "local": [p.local_epochs, p.local_lr, p.local_batch_size, p.local_momentum],
        }

    def compute_votes(self, rows: int) -> np.ndarray:
        p, data = self.params, self.data
        init = stack_copies(self.layout.flatten_module(self.model), self.num_agents)
        local = train_sgd(
            self.model,
            self.layout,
            init,
            data.x_train,
            data.y_train,
            data.silos,
            epochs=p.local_epochs,
            batch_size=p.local_batch_size,
            lr=p.local_lr,
            momentum=p.local_momentum,
            seed=self.noise_key,
            stream=LOCAL_STREAM,
        )
        labels = predicted_labels(self.model, self.layout, local, self.pool_x[:rows])
        return one_hot_votes(labels, data.num_classes).cpu().numpy()

"""AE-DPFL (reference/003_voting_dpfl.md §2.1, Algorithm 2): agents' local models vote one-hot.

Every agent trains the spec's model on its own records (all agents at once, one [N, P]
stack), then predicts a label for each public query; the summed one-hot votes go through the
noisy argmax. The local models never leave the agents, so their training is not a release.
Sensitivity: 1 at agent level, √2 at instance level (one record can flip an agent's label).

AE-DPFL+DA (`ae_dpfl_da`, §2.2) is the same vote with each local model trained by
domain-adversarial training on the agent's records and the server's unlabelled public pool
(`adaptation.train_dann`): the pool is public and the local model stays inside the agent, so
its ledger is AE-DPFL's for the same σ and queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.voting.adaptation import domain_head, feature_split, train_dann
from dpfl.algorithms.voting.base import VotingAlgorithm, VotingParams
from dpfl.algorithms.voting.training import train_sgd
from dpfl.algorithms.voting.votes import one_hot_votes, predicted_labels
from dpfl.engine import stack_copies
from dpfl.engine.noise import model_draws
from dpfl.federation import FederatedData
from dpfl.spec import RunSpec

__all__ = ["AEDPFL", "AEDPFLDA", "LOCAL_ROUND", "AEDAParams", "AEParams"]

LOCAL_STREAM = 8
"""Stream of the agents' local minibatch order."""
TARGET_STREAM = 10
"""Stream of the agents' minibatches of the public pool in domain-adversarial training."""
LOCAL_ROUND = 0
"""The round whose model draws (dropout masks, `dpfl.engine.noise.model_draws`) the agents' local
training takes: it happens before round 1."""


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
        # The local models train before round 1; a model with dropout draws their masks under
        # round 0's generator of the run's key (the mechanism's coins, as the runner's rounds
        # draw theirs), so the votes depend on the data and the key alone. Votes are predicted
        # in eval mode (`predicted_labels`): no dropout at prediction.
        with model_draws(self.noise_key, LOCAL_ROUND):
            local = self.local_models(stack_copies(self.layout.flatten_module(self.model), self.num_agents))
        labels = predicted_labels(self.model, self.layout, local, self.pool_x[:rows])
        return one_hot_votes(labels, self.data.num_classes).cpu().numpy()

    def local_models(self, init: torch.Tensor) -> torch.Tensor:
        """Returns every agent's local model [N, P], trained from `init` [N, P] on its own records."""
        p, data = self.params, self.data
        return train_sgd(
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


class AEDAParams(AEParams):
    domain_hidden: int = Field(
        100,
        ge=1,
        le=10_000,
        description="hidden units of each agent's domain classifier (Ganin et al. 2016 use 100)",
    )
    domain_gamma: float = Field(
        10.0,
        ge=0,
        le=1000,
        description="γ of the gradient reversal's schedule λ_p = 2/(1 + exp(−γp)) − 1, p the fraction of "
        "local training done (Ganin et al. 2016: 10; 0 turns the reversal off)",
    )


@ALGORITHMS.register("ae_dpfl_da")
class AEDPFLDA(AEDPFL):
    """AE-DPFL+DA: AE-DPFL whose agents train their local models by domain-adversarial training
    (DANN, Ganin et al. 2016) on their own records and the server's unlabelled public pool.

    Only the local training changes (`adaptation.train_dann`): the votes, the noise, the ledger
    and the student are AE-DPFL's. The target records are the whole public pool (the queries and
    the rest of the pool, all public and unlabelled), never the test records left after it.
    """

    Params = AEDAParams
    summary = (
        "AE-DPFL with domain adaptation: agents train their local models adversarially against a domain "
        "classifier on the server's unlabelled public pool, then vote as in AE-DPFL"
    )
    public_inputs = (
        "the agents' local models also train on the server's unlabelled public pool (domain adaptation); "
        "the pool is public and the local models never leave the agents, so the ledger is AE-DPFL's for "
        "the same σ and queries"
    )

    def __init__(self, spec: RunSpec, data: FederatedData, model: torch.nn.Module):
        super().__init__(spec, data, model)
        self.split = feature_split(self.model, name=spec.model.name, algorithm=self.name)

    def vote_key(self) -> dict[str, Any]:
        p = self.params
        return super().vote_key() | {"domain": [p.domain_hidden, p.domain_gamma]}

    def local_models(self, init: torch.Tensor) -> torch.Tensor:
        """Returns every agent's local model [N, P], trained from `init` [N, P] by DANN on its own
        records (source) and the public pool (target)."""
        p, data = self.params, self.data
        head = domain_head(self.split.width, hidden=p.domain_hidden, seed=self.spec.seed)
        return train_dann(
            self.model,
            self.layout,
            head,
            init,
            data.x_train,
            data.y_train,
            data.silos,
            self.pool_x,
            epochs=p.local_epochs,
            batch_size=p.local_batch_size,
            lr=p.local_lr,
            momentum=p.local_momentum,
            gamma=p.domain_gamma,
            seed=self.noise_key,
            stream=LOCAL_STREAM,
            target_stream=TARGET_STREAM,
        ).models

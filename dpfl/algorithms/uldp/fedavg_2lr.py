"""FedAvg with global and local learning rates: the ULDP-FL paper's DEFAULT (reference §2.1).

Every silo runs Q epochs of minibatch SGD (local rate η_l, batch B) from the server's model;
the server adds η_g times the plain mean of the silos' deltas (not weighted by silo size, as
in the paper). All silos train at once (`groups.local_sgd`). Non-private: the reference line
of every ULDP comparison, and the local training ULDP-NAIVE privatises.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput, participants
from dpfl.algorithms.uldp.groups import RecordGroups, local_deltas
from dpfl.algorithms.uldp.users import require_one_noise_multiplier

__all__ = ["FedAvg2LR", "LocalTrainingParams", "UserLevelFedAvg2LR"]

PAPER = "004: Kato et al., ULDP-FL: Federated Learning with Across-Silo User-Level DP"


class LocalTrainingParams(Params):
    global_lr: float = Field(1.0, gt=0, le=10_000, description="server learning rate η_g")
    local_lr: float = Field(0.01, gt=0, le=100, description="local learning rate η_l")
    local_epochs: int = Field(5, ge=1, le=1000, description="local epochs Q per round")
    batch_size: int = Field(64, ge=1, le=100_000, description="local minibatch size B")


@ALGORITHMS.register("fedavg_2lr")
class FedAvg2LR(Algorithm):
    """FedAvg with two learning rates: Q local epochs per silo, server step η_g · mean delta."""

    Params = LocalTrainingParams
    notion = "none"
    paper = PAPER
    summary = "non-private FedAvg with global and local learning rates (the ULDP-FL paper's DEFAULT)"

    def setup(self, noise_multiplier) -> None:
        self.w = self.layout.flatten_module(self.model).detach().clone()

    def silo_deltas(self, silos: np.ndarray, r: int) -> torch.Tensor:
        """Returns each listed silo's model delta after its local epochs, [S, P]."""
        groups = RecordGroups.of_silos(self.data, silos)
        position = {int(s): i for i, s in enumerate(silos)}
        out = torch.empty(len(groups), self.layout.size, dtype=self.w.dtype)
        for block in groups.blocks(self.data, params=self.layout.size, batch_size=self.params.batch_size):
            out[[position[int(s)] for s in groups.silo[block]]] = local_deltas(self, groups, block, r)
        return out

    def round(self, r: int) -> RoundOutput:
        deltas = self.silo_deltas(participants(self.spec, r, self.noise_key), r)
        self.w = self.w + self.params.global_lr * deltas.mean(0)
        return RoundOutput()

    @property
    def global_params(self) -> torch.Tensor:
        return self.w


class UserLevelFedAvg2LR(FedAvg2LR):
    """FedAvg2LR under one noise multiplier σ for all silos: the base of ULDP-NAIVE and
    ULDP-GROUP, whose user-level release is one noisy sum over silos."""

    def check_noise(self, noise_multiplier) -> None:
        require_one_noise_multiplier(self.name, noise_multiplier)

    def setup(self, noise_multiplier) -> None:
        self.check_noise(noise_multiplier)
        self.sigma = float(noise_multiplier)
        super().setup(noise_multiplier)

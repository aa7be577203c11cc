"""ULDP-NAIVE (reference §2.2): DP-FedAvg with the noise scaled for a user present in every silo.

One user can move every silo's delta, so the user-level sensitivity of Σ_s Δ_s is |S|·C.
Each silo clips its delta to C and adds N(0, σ²C²|S|); the sum carries variance σ²(|S|C)², a
Gaussian mechanism with multiplier σ per round on the user level. No user allocation is
needed: the bound holds for any number of records per user.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from dpfl.algorithms.base import RoundOutput, participants, register_algorithm
from dpfl.algorithms.uldp.fedavg_2lr import PAPER, FedAvg2LR, LocalTrainingParams
from dpfl.algorithms.uldp.users import USERS_PARTY, clip_rows, user_level_plan
from dpfl.engine import release
from dpfl.errors import SpecError
from dpfl.privacy.events import GaussianEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["ULDPNaive"]


class NaiveParams(LocalTrainingParams):
    clip: float = Field(0.1, gt=0, le=1e4, description="clipping norm C of each silo's delta")


@register_algorithm("uldp_naive")
class ULDPNaive(FedAvg2LR):
    """DP-FedAvg whose per-silo noise std is σC√|S| (user-level sensitivity |S|C)."""

    Params = NaiveParams
    notion = "user"
    paper = PAPER
    summary = "user-level DP-FedAvg: per-silo noise σC√|S| for sensitivity |S|C"

    def plan(self, noise_multiplier: float) -> Ledger:
        return user_level_plan(self.spec, GaussianEvent(float(noise_multiplier)))

    def setup(self, noise_multiplier) -> None:
        if noise_multiplier is None or np.ndim(noise_multiplier) != 0:
            raise SpecError("privacy", f"{self.name} takes one noise multiplier for all silos.")
        self.sigma = float(noise_multiplier)
        super().setup(noise_multiplier)

    def round(self, r: int) -> RoundOutput:
        p = self.params
        silos = participants(self.spec, r)
        clipped, frac = clip_rows(self.silo_deltas(silos, r), p.clip)
        std = self.sigma * p.clip * math.sqrt(len(silos))
        noisy = release(clipped, std, seed=self.spec.seed, silos=silos, round=r, secure_sum=True)
        self.w = self.w + p.global_lr * noisy.mean(0)
        return RoundOutput(
            metrics={"clip_fraction": frac, "silo_noise_std": std},
            releases={USERS_PARTY: [GaussianEvent(self.sigma)]},
        )

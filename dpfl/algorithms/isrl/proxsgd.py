"""ISRL-DP noisy distributed prox-SGD (Alg. 6, Thm 2.1; reference/000_isrl_dp.md §3.1).

MB-SGD's messages, then the server's proximal step w ← prox_{η f1}(w − η ḡ), for a constraint
set (``l2_ball``) or a regulariser (``l1``, ``l2``); see `dpfl.algorithms.isrl.prox`. The
authors' code has no prox step anywhere (reference §9.4); here it is part of every update.
The privacy cost is exactly MB-SGD's: the prox acts on the public average.

Batches are Poisson samples, fresh each round, not the theory's disjoint batches (which would
allow parallel composition over rounds); the ledger accounts for what is actually done.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams
from dpfl.algorithms.isrl.prox import prox

__all__ = ["ISRLProxSGD"]


class ProxSGDParams(MBSGDParams):
    prox: Literal["l2_ball", "l1", "l2"] = Field("l2_ball", description="the regulariser f1 of the prox step")
    radius: float = Field(10.0, gt=0, le=1e6, description="radius of the l2 ball (prox = l2_ball)")
    strength: float = Field(1e-3, ge=0, le=1e4, description="λ of the l1 or l2 regulariser")


@ALGORITHMS.register("isrl_proxsgd")
class ISRLProxSGD(ISRLMinibatchSGD):
    """ISRL-DP noisy prox-SGD: MB-SGD's noisy messages, then a proximal (or projection) step."""

    Params = ProxSGDParams
    summary = "ISRL-DP noisy prox-SGD: MB-SGD with an l2-ball projection or l1/l2 prox step"

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        p = self.params
        if p.prox == "l2_ball":  # start feasible: the analysis assumes w0 ∈ W
            self.w = prox(self.w, kind=p.prox, lr=p.lr, strength=p.strength, radius=p.radius)

    def step(self, w: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        p = self.params
        return prox(w - p.lr * direction, kind=p.prox, lr=p.lr, strength=p.strength, radius=p.radius)

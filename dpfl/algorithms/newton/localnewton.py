"""LocalNewton (Gupta et al., UAI 2021): the non-private reference of seed 001 ("μ = ∞").

Each client takes L exact Newton steps H⁻¹g on its own ridge-regularised logistic loss, with
Armijo backtracking by default (the paper's line search with no noise), and the server
averages the models.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.newton.core import Direction, LocalSolver, NewtonParams
from dpfl.algorithms.newton.mechanism import newton_directions
from dpfl.algorithms.newton.objective import gradients, hessians

__all__ = ["LocalNewton", "LocalNewtonParams"]


class LocalNewtonParams(NewtonParams):
    step: Literal["line_search", "fixed", "decay"] = Field(
        "line_search", description="step-size rule: the line search (Armijo here), fixed α or decaying α_t"
    )
    lr: float = Field(1.0, gt=0, le=100, description="the line search's α*, the fixed step or the first step")


@ALGORITHMS.register("localnewton")
class LocalNewton(LocalSolver):
    """Exact local Newton steps on every client at once (one batched solve), then the mean."""

    Params = LocalNewtonParams
    notion = "none"
    summary = "non-private LocalNewton: local Newton steps, models averaged"

    def direction(self, data, w, clients, r, step) -> Direction:
        ridge = self.params.ridge
        grads, _ = gradients(data, w, ridge=ridge)
        hess = hessians(data, w, ridge=ridge)
        return Direction(newton_directions(hess, grads), grads, hess, torch.zeros_like(grads))

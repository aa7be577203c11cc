"""GDP-GD (Appendix D, Algorithm A1 of reference/001_gdp_localnewton.md): the first-order baseline.

Each local step, every client releases its local gradient (each record's gradient clipped to
Γ) plus N(0, σ_g²I) and steps along it; the server averages the models. One release per step,
so σ = √T/μ and σ_g = 2Γ√T/(μs). The paper's server sums the models (printed Σ); we average,
which is what a step size of the paper's scale implies (reference §8, item 6).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.newton.core import ClippedParams, Direction, LocalSolver
from dpfl.algorithms.newton.mechanism import noise_std, noisy_gradients
from dpfl.algorithms.newton.objective import gradients

__all__ = ["GDPGD", "GDPGDParams"]


class GDPGDParams(ClippedParams):
    step: Literal["fixed", "decay"] = Field("fixed", description="step-size rule: fixed α or decaying α_t")
    lr: float = Field(1.0, gt=0, le=100, description="the fixed step or the first decaying step")


@ALGORITHMS.register("gdp_gd")
class GDPGD(LocalSolver):
    """Noisy full-batch local gradient steps, models averaged."""

    Params = GDPGDParams
    notion = "gdp"
    summary = "μ-GDP gradient descent: Gaussian noise on each client's full local gradient"
    releases_per_step = 1

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        self.grad_std = noise_std(self.sigmas, bound=self.params.grad_bound, sizes=self.data.silo_sizes)

    def direction(self, data, w, clients, r, step) -> Direction:
        grads, clipped = gradients(data, w, ridge=self.params.ridge, clip=self.params.grad_bound)
        noisy = noisy_gradients(
            grads, self.grad_std[clients], seed=self.noise_key, clients=clients, round=r, step=step
        )
        return Direction(noisy, metrics={"clip_fraction": float(clipped.mean())})

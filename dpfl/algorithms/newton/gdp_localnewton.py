"""GDP-LocalNewton (Algorithm 1 of reference/001_gdp_localnewton.md): μ-GDP local Newton steps.

Each local step, every client computes its local gradient (each record's gradient clipped to
Γ) and Hessian (rows clipped to R bound each record's Hessian by B = R²/4), adds Gaussian
noise to both (the Hessian's symmetric), raises the noisy Hessian's eigenvalues to the floor
(the ridge γ by default, Remark 1) and steps along Ĥ⁻¹ĝ. All clients' eigendecompositions and
solves are one batched call each. Two releases per local step, each (1/σ)-GDP.

The paper's line search (`step: line_search`) reads the exact local loss; the run is then
flagged as not covered by the privacy guarantee (`privacy_caveat`).
"""

from __future__ import annotations

from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.newton.core import ClippedParams, Direction, LocalSolver, NewtonParams
from dpfl.algorithms.newton.mechanism import (
    floor_eigenvalues,
    newton_directions,
    noise_std,
    noisy_gradients,
    noisy_hessians,
)
from dpfl.algorithms.newton.objective import gradients, hessians

__all__ = ["LINE_SEARCH_CAVEAT", "GDPLocalNewton", "GDPLocalNewtonParams"]

LINE_SEARCH_CAVEAT = (
    "privacy not guaranteed: line search uses raw data (its step reads the exact local loss, "
    "gradient and Hessian, outside the μ-GDP proof); use `step: fixed` or `decay` for a private run"
)


class GDPLocalNewtonParams(NewtonParams, ClippedParams):
    eigen_floor: float | None = Field(
        None,
        gt=0,
        le=100,
        description="floor of the noisy Hessian's eigenvalues (None: the ridge γ, as the paper)",
    )


@ALGORITHMS.register("gdp_localnewton")
class GDPLocalNewton(LocalSolver):
    """Noisy gradient and noisy symmetric Hessian per local step; eigenvalue floor; batched solve."""

    Params = GDPLocalNewtonParams
    notion = "gdp"
    summary = "μ-GDP local Newton steps: Gaussian noise on each client's gradient and Hessian"
    releases_per_step = 2

    @property
    def hessian_bound(self) -> float:
        """Returns B = R²/4: the logistic ℓ'' ≤ 1/4 times ‖x‖² ≤ R² (Frobenius norm of a rank-one term)."""
        return self.params.feature_clip**2 / 4

    def privacy_caveat(self) -> str | None:
        return LINE_SEARCH_CAVEAT if self.params.step == "line_search" else None

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        sizes = self.data.silo_sizes
        self.grad_std = noise_std(self.sigmas, bound=self.params.grad_bound, sizes=sizes)
        self.hessian_std = noise_std(self.sigmas, bound=self.hessian_bound, sizes=sizes)

    def direction(self, data, w, clients, r, step) -> Direction:
        p, seed = self.params, self.noise_key
        grads, clipped = gradients(data, w, ridge=p.ridge, clip=self.params.grad_bound)
        hess = hessians(data, w, ridge=p.ridge)
        noisy_g = noisy_gradients(
            grads, self.grad_std[clients], seed=seed, clients=clients, round=r, step=step
        )
        noisy_h = noisy_hessians(
            hess, self.hessian_std[clients], seed=seed, clients=clients, round=r, step=step
        )
        floored, raised = floor_eigenvalues(noisy_h, p.ridge if p.eigen_floor is None else p.eigen_floor)
        direction = newton_directions(floored, noisy_g)
        error = None
        if p.step == "line_search":  # Ñ needs the noise-free direction: raw data again
            error = direction - newton_directions(hess, grads)
        return Direction(
            direction,
            grads,
            hess,
            error,
            {"clip_fraction": float(clipped.mean()), "eigen_floored": float(raised.mean())},
        )

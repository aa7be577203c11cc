"""Step-size rules of the second-order family: fixed, decaying, and the paper's line search.

`fixed` and `decay` depend only on the iteration count, so they are decided before seeing any
data and cost no privacy. The line search of eq. (10) (reference/001_gdp_localnewton.md §2.3)
reads the exact local loss, gradient and Hessian and the noise-free Newton direction; its step
multiplies the released update, so the step leaks private data through a channel the μ-GDP
proof does not cover. It is offered to reproduce the paper and is flagged on the run.
"""

from __future__ import annotations

import torch

from dpfl.algorithms.newton.objective import ClientData, losses

__all__ = ["decayed_step", "line_search"]


def decayed_step(initial: float, *, rate: float, iteration: int, form: str) -> float:
    """Returns the decaying step of global iteration t (from 0).

    `geometric`: α_t = α₀·ρ^t (each step ρ times the previous, the paper's prose);
    `compounding`: α_{t+1} = ρ^{t+1}·α_t, i.e. α_t = α₀·ρ^{t(t+1)/2} (the other reading of the
    paper's "α_{t+1} = σ^{t+1} α_t").
    """
    power = iteration if form == "geometric" else iteration * (iteration + 1) / 2
    return initial * rate**power


def line_search(
    data: ClientData,
    w: torch.Tensor,
    direction: torch.Tensor,
    grads: torch.Tensor,
    hessians: torch.Tensor,
    error: torch.Tensor,
    *,
    ridge: float,
    max_step: float,
    beta: float,
    shrink: float,
    candidates: int,
) -> torch.Tensor:
    """Returns each client's step α_k [K]: the largest α = α*·shrink^j (j < `candidates`) with

        f^k(w − α p̂) ≤ f^k(w) − α β p̂ᵀg + α (1 − β) p̂ᵀ H Ñ        (eq. 10)

    where p̂ is the (noisy) direction, g and H the exact local gradient and Hessian, and
    Ñ = p̂ − H⁻¹g the noise in the direction (zero without noise, which leaves Armijo's rule).
    Every candidate of every client is evaluated in one batched loss call; a client with no
    acceptable candidate takes the smallest.
    """
    steps = max_step * shrink ** torch.arange(candidates, dtype=w.dtype)  # [J], decreasing
    trial = w[:, None, :] - steps[None, :, None] * direction[:, None, :]
    trial_loss = losses(data, trial, ridge=ridge)  # [K, J]
    start = losses(data, w, ridge=ridge)
    descent = (direction * grads).sum(-1)
    noise_term = (direction * torch.einsum("kde,ke->kd", hessians, error)).sum(-1)
    bound = start[:, None] + steps[None, :] * (-beta * descent + (1 - beta) * noise_term)[:, None]
    accepted = trial_loss <= bound
    # The first accepted candidate is the largest step; none accepted falls to the last one.
    first = torch.where(accepted.any(1), accepted.to(torch.int8).argmax(1), candidates - 1)
    return steps[first]

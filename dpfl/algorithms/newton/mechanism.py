"""The Gaussian releases of the second-order family and the batched Newton step built on them.

Sensitivity (reference/001_gdp_localnewton.md §1.5): replacing one record of client k moves
its local gradient by at most 2Γ/s_k and its local Hessian by at most 2B/s_k in Frobenius
norm, when each record's gradient is clipped to Γ and its Hessian is bounded by B (rows
clipped to R give B = R²/4 for the logistic loss). The ridge term is the same on both sides
and cancels. The guarantee is for replace-one neighbours (s_k fixed and public): adding or
removing a record moves the mean by ≤ 2Γ/s_k too, but the noise std 2Γσ/s_k would then change
with s_k, which no Gaussian event of one multiplier covers, so the events say `replace_one`.

A release with noise multiplier σ adds N(0, (σ·sensitivity)²) to each coordinate (for the
Hessian, to each entry on and above the diagonal, mirrored below), so it is exactly
(1/σ)-GDP (Lemma 1). With μ split evenly over the 2T releases of a client, σ = √(2T)/μ and
the noise standard deviations are the paper's closed forms (Algorithm 1):

    σ_g = 2Γ√(2T)/(μ s),    σ_H = 2B√(2T)/(μ s).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpfl.engine import release_noise

__all__ = [
    "floor_eigenvalues",
    "newton_directions",
    "noise_std",
    "noisy_gradients",
    "noisy_hessians",
    "paper_noise_scales",
]

# Noise streams of the engine's generators (0 and 1 are the engine's own): local step ℓ draws
# its gradient noise from stream 16 + 2ℓ and its Hessian noise from 17 + 2ℓ, so GDP-GD and
# GDP-LocalNewton with the same seed add the same gradient noise.
_FIRST_STREAM = 16


def paper_noise_scales(
    *, mu: float, iterations: int, grad_bound: float, hessian_bound: float, size: float
) -> tuple[float, float]:
    """Returns the paper's (σ_g, σ_H) for μ over T = `iterations` local iterations on s = `size` records."""
    scale = math.sqrt(2 * iterations) / (mu * size)
    return 2 * grad_bound * scale, 2 * hessian_bound * scale


def noise_std(noise_multiplier: np.ndarray, *, bound: float, sizes: np.ndarray) -> np.ndarray:
    """Returns each client's noise std σ_k·2·bound/s_k: the noise multiplier times the
    replace-one sensitivity of a local mean of records each bounded by `bound`."""
    return np.asarray(noise_multiplier, dtype=float) * 2.0 * bound / np.asarray(sizes, dtype=float)


def noisy_gradients(
    grads: torch.Tensor, std: np.ndarray, *, seed: int, clients: np.ndarray, round: int, step: int
) -> torch.Tensor:
    """Returns ĝ_k = g_k + N(0, std_k² I) for every client, [K, d]."""
    noise = release_noise(grads, std, seed=seed, silos=clients, round=round, stream=_FIRST_STREAM + 2 * step)
    return grads + noise


def noisy_hessians(
    hessians: torch.Tensor, std: np.ndarray, *, seed: int, clients: np.ndarray, round: int, step: int
) -> torch.Tensor:
    """Returns Ĥ_k = H_k + std_k·U_k with U_k symmetric, its entries on and above the diagonal
    i.i.d. N(0, 1) (the paper's Wigner-type noise), [K, d, d]."""
    # What the noise protects is the upper triangle (the lower one mirrors it), so that is the
    # value recorded for the auditor; the draws below the diagonal are discarded.
    draws = release_noise(
        torch.triu(hessians), std, seed=seed, silos=clients, round=round, stream=_FIRST_STREAM + 2 * step + 1
    )
    upper = torch.triu(draws)
    return hessians + upper + torch.triu(draws, diagonal=1).transpose(1, 2)


def floor_eigenvalues(hessians: torch.Tensor, floor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (V·diag(max(λ, floor))·Vᵀ for every client [K, d, d], fraction of λ raised [K]).

    Remark 1 of the paper: a noisy Hessian can be indefinite; raising its eigenvalues to the
    ridge γ makes the Newton system solvable. It is post-processing of the release, so it
    costs no privacy. One batched `eigh` for all clients.
    """
    eigenvalues, vectors = torch.linalg.eigh(hessians)
    raised = eigenvalues < floor
    floored = (vectors * eigenvalues.clamp(min=floor)[:, None, :]) @ vectors.transpose(1, 2)
    return floored, raised.to(hessians.dtype).mean(-1)


def newton_directions(hessians: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Returns p_k = H_k⁻¹ g_k for every client in one batched solve, [K, d]."""
    return torch.linalg.solve(hessians, grads.unsqueeze(-1)).squeeze(-1)

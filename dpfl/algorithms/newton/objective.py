"""The ridge-regularised logistic loss of every client at once: value, gradient and Hessian.

Each client k holds s_k records (x_j, y_j) with y_j ∈ {−1, +1}; its local objective is

    f^k(w) = (1/s_k) Σ_{j∈S_k} log(1 + exp(−y_j wᵀx_j)) + (γ/2)‖w‖²

(reference/001_gdp_localnewton.md §2.1; no intercept, as in the paper: a9a's one-hot rows
already hold a constant in their span). Clients are stacked and padded to the largest s_k
with a mask, so every function here is one batched tensor computation over [K, s, d].

Rows are clipped to norm R when the data are built. For the logistic loss that bounds each
record's Hessian, ℓ''(m)·x xᵀ with ℓ'' ≤ 1/4, by B = R²/4 in Frobenius norm (it is rank one,
so its Frobenius and spectral norms agree), and its gradient by R. These are the bounds the
privacy of the noisy releases rests on (reference §1.6, items 2–4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from dpfl.federation import FederatedData

__all__ = ["ClientData", "client_data", "gradients", "hessians", "losses"]

DTYPE = torch.float64  # d ≤ a few hundred: exact solves and eigendecompositions cost nothing


@dataclass(frozen=True)
class ClientData:
    """Every client's records, padded: x [K, s, d], y ±1 [K, s], mask [K, s], sizes [K].

    Padded rows are zero in x, y and mask, so they add nothing to any sum below.
    """

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    sizes: torch.Tensor

    @property
    def dim(self) -> int:
        """Returns d, the number of features (and of model weights)."""
        return self.x.shape[-1]

    def take(self, clients: np.ndarray | torch.Tensor) -> ClientData:
        """Returns the listed clients' records (rows in the order given)."""
        idx = torch.as_tensor(np.asarray(clients), dtype=torch.long)
        if torch.equal(idx, torch.arange(len(self.sizes))):
            return self  # everyone takes part: no copy
        return ClientData(self.x[idx], self.y[idx], self.mask[idx], self.sizes[idx])


def client_data(data: FederatedData, *, radius: float | None) -> ClientData:
    """Returns every silo's training records as padded tensors, rows clipped to norm `radius`.

    Labels {0, 1} become {−1, +1}. `radius` None keeps the rows as they are (only for
    non-private runs: without it the Hessian and gradient have no sensitivity bound).
    """
    x_all = data.x_train.reshape(len(data.x_train), -1).to(DTYPE)
    if radius is not None:
        norms = torch.linalg.vector_norm(x_all, dim=1, keepdim=True)
        # Each record is scaled on its own, so clipping is part of the per-record computation
        # and adds no sensitivity of its own.
        x_all = x_all * torch.clamp(radius / norms.clamp(min=1e-300), max=1.0)
    y_all = data.y_train.to(DTYPE) * 2 - 1
    counts = torch.tensor(data.silo_sizes, dtype=torch.long)  # a copy: silo_sizes is read-only
    k, width, d = len(data.silos), int(counts.max()), x_all.shape[1]
    rows = torch.cat(data.silos)
    silo = torch.repeat_interleave(torch.arange(k), counts)
    slot = torch.arange(len(rows)) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    x = torch.zeros(k, width, d, dtype=DTYPE)
    y = torch.zeros(k, width, dtype=DTYPE)
    mask = torch.zeros(k, width, dtype=DTYPE)
    x[silo, slot] = x_all[rows]
    y[silo, slot] = y_all[rows]
    mask[silo, slot] = 1.0
    return ClientData(x, y, mask, counts.to(DTYPE))


def losses(data: ClientData, w: torch.Tensor, *, ridge: float) -> torch.Tensor:
    """Returns f^k at each client's point(s): w [K, d] gives [K]; w [K, J, d] gives [K, J]."""
    points = w if w.dim() == 3 else w[:, None, :]
    margins = data.y[:, :, None] * torch.einsum("ksd,kjd->ksj", data.x, points)  # [K, s, J]
    data_loss = torch.einsum("ks,ksj->kj", data.mask, F.softplus(-margins)) / data.sizes[:, None]
    out = data_loss + 0.5 * ridge * (points * points).sum(-1)
    return out if w.dim() == 3 else out[:, 0]


def gradients(
    data: ClientData, w: torch.Tensor, *, ridge: float, clip: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (∇f^k(w_k) [K, d], fraction of records clipped [K]) with each record's gradient
    of the data term clipped to norm `clip` (None: not clipped).

    A record's gradient is −σ(−m)·y·x with m = y wᵀx, a multiple of x, so clipping scales a
    scalar coefficient and no per-record gradient is ever materialised. The ridge term γw is
    the same for neighbouring data sets and is added after clipping.
    """
    margins = data.y * torch.einsum("ksd,kd->ks", data.x, w)
    weight = torch.sigmoid(-margins)  # |ℓ'(m)|
    coef = -weight * data.y
    clipped = torch.zeros_like(data.sizes)
    if clip is not None:
        norms = weight * torch.linalg.vector_norm(data.x, dim=-1)
        scale = torch.clamp(clip / norms.clamp(min=1e-300), max=1.0)
        coef = coef * scale
        clipped = ((scale < 1) * data.mask).sum(1) / data.sizes
    grad = torch.einsum("ks,ksd->kd", coef * data.mask, data.x) / data.sizes[:, None]
    return grad + ridge * w, clipped


def hessians(data: ClientData, w: torch.Tensor, *, ridge: float) -> torch.Tensor:
    """Returns ∇²f^k(w_k) = (1/s_k) Σ_j σ(m_j)σ(−m_j) x_j x_jᵀ + γI for every client, [K, d, d]."""
    margins = data.y * torch.einsum("ksd,kd->ks", data.x, w)
    curvature = torch.sigmoid(margins) * torch.sigmoid(-margins) * data.mask / data.sizes[:, None]
    weighted = data.x * curvature[:, :, None]
    eye = torch.eye(data.dim, dtype=w.dtype)
    return weighted.transpose(1, 2) @ data.x + ridge * eye

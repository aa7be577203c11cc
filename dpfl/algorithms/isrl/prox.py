"""Proximal operators prox_{η f1}(v) = argmin_w f1(w) + ‖w − v‖²/(2η) for the regularisers f1 of
noisy prox-SGD (reference/000_isrl_dp.md §3.1). Each is applied by the server to the public
average of private messages, so it is post-processing and costs no privacy.
"""

from __future__ import annotations

import torch

__all__ = ["PROX_KINDS", "prox"]

PROX_KINDS = ("none", "l2_ball", "l1", "l2")


def prox(v: torch.Tensor, *, kind: str, lr: float, strength: float, radius: float) -> torch.Tensor:
    """Returns prox_{η f1}(v) for f1 of the given kind.

    - ``none``: f1 = 0, the identity.
    - ``l2_ball``: f1 the indicator of {‖w‖₂ ≤ radius}: the Euclidean projection v·min(1, radius/‖v‖).
    - ``l1``: f1 = λ‖w‖₁: soft-thresholding sign(v)·max(|v| − ηλ, 0).
    - ``l2``: f1 = (λ/2)‖w‖₂²: shrinkage v / (1 + ηλ).

    Args:
        lr: the step size η > 0.
        strength: λ ≥ 0 of the ℓ1 and ℓ2 regularisers.
        radius: the ball's radius > 0.
    """
    if kind == "none":
        return v
    if kind == "l2_ball":
        return v * (radius / torch.linalg.vector_norm(v).clamp(min=radius))
    if kind == "l1":
        return torch.sign(v) * (v.abs() - lr * strength).clamp(min=0)
    if kind == "l2":
        return v / (1 + lr * strength)
    raise ValueError(f"prox kind must be one of {', '.join(PROX_KINDS)}; got {kind!r}")

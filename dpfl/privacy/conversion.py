"""RDP → (ε, δ) conversions, vectorised over many RDP curves at once.

The ledger converts one RDP curve per round per party; calling dp_accounting's scalar
`compute_epsilon` 100,000 times is too slow, so `rdp_to_epsilon` applies the same bound to a
whole matrix with numpy. It is tested equal to `dp_accounting.rdp.compute_epsilon`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONVERSIONS", "conversion_offsets", "kl_zero_threshold", "rdp_to_epsilon"]

CONVERSIONS = ("tight", "classic")


def rdp_to_epsilon(
    orders: np.ndarray, rdp: np.ndarray, *, delta: float, conversion: str = "tight"
) -> np.ndarray:
    """Returns ε for each RDP curve in `rdp` (shape [..., num_orders]), minimised over orders.

    Args:
        orders: RDP orders α > 1, shape [num_orders].
        rdp: RDP values ε(α), shape [..., num_orders]; +inf where an order gives no bound.
        delta: target δ in (0, 1).
        conversion: "tight" is Balle et al. 2020 (arXiv 2004.00010, Prop. 12) with the KL bound
            δ ≥ √(1 − e^{−ε(α)}) giving ε = 0, exactly as dp_accounting 0.6 computes it;
            "classic" is Mironov 2017, Prop. 3: ε = ε(α) + log(1/δ)/(α − 1), the conversion
            several papers report (e.g. the voting paper's Lemma 10).

    Returns:
        ε ≥ 0 with shape rdp.shape[:-1]; +inf where no order gives a finite bound.
    """
    rdp = np.asarray(rdp, dtype=float)
    eps = (rdp + conversion_offsets(orders, delta=delta, conversion=conversion)).min(axis=-1)
    if conversion == "tight":
        eps = np.where((rdp < kl_zero_threshold(delta)).any(axis=-1), 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    return np.maximum(eps, 0.0)


def conversion_offsets(orders: np.ndarray, *, delta: float, conversion: str = "tight") -> np.ndarray:
    """Returns offset(α) with ε(α) = rdp(α) + offset(α): the conversion at each order, before the minimum.

    The offsets depend on the orders and δ only, so converting a curve is one add per order.
    """
    orders = np.asarray(orders, dtype=float)
    with np.errstate(divide="ignore"):
        if conversion == "classic":
            return -np.log(delta) / (orders - 1)
        if conversion == "tight":
            tight = np.log1p(-1 / orders) - np.log(delta * orders) / (orders - 1)
            return np.where(orders > 1.01, tight, np.inf)
    raise ValueError(f"`conversion` must be one of {', '.join(CONVERSIONS)}; got {conversion!r}.")


def kl_zero_threshold(delta: float) -> float:
    """Returns t with ε = 0 under the tight conversion when rdp(α) < t at any order.

    The KL bound: δ ≥ √(1 − e^{−rdp(α)}) gives ε = 0, i.e. rdp(α) < −log(1 − δ²).
    """
    return float(-np.log1p(-(delta**2)))

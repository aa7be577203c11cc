"""Cheu, Joseph, Mao & Peng's (2021) shuffle protocol for summing vectors of bounded ℓ2 norm, P_vec.

Reference: "Shuffle Private Stochastic Convex Optimization" (ICLR 2022, arXiv 2106.09805),
§3: the scalar randomizer R_1D and analyzer A_1D, the vector protocol P_vec = (R_vec, A_vec)
and its theorem (reference/000_isrl_dp.md §3.2 cites it as Thm D.2).

Each of n users holds x ∈ R^d with ‖x‖₂ ≤ L. R_vec maps each coordinate into [0, 1],
w_j = (x_j + L) / (2L), and runs R_1D on it with parameters (g, b, p):

    x̄_j = ⌊w_j g⌋ + Ber(w_j g − ⌊w_j g⌋)      randomised rounding to granularity 1/g: E x̄_j = g w_j
    η_j ~ Bin(b, p)                             b noise bits of bias p
    messages: x̄_j + η_j ones and g + b − x̄_j − η_j zeros, each labelled j.

The shuffler's output, a multiset of labelled bits, reveals only the number of ones per label,
y_j = Σ_users (x̄_j + η_j); so a user's messages for label j are represented here by that count
m_j = x̄_j + η_j ∈ {0, …, g + b}. A_vec debiases y_j: Σ_i w_ij is estimated by (y_j − n b p)/g,
and Σ_i x_ij = 2L Σ_i w_ij − nL. The estimate is unbiased, with variance per coordinate

    Var = (2L/g)² · (Σ_i f_ij (1 − f_ij) + n b p (1 − p)),     f_ij = frac(w_ij g).

Parameters and privacy (the theorem): for 0 < ε ≤ 15, 0 < δ < 1/2 and any n, d, with
g = max(2√n, √d, 4), b = ⌈24·10⁴ g² ln²(4d/δ) / (ε² n)⌉ and p = 1/4, the shuffled output is
(ε, δ)-DP for n users' vectors of norm ≤ L, where neighbours differ in one user's vector.
Here g is rounded up to an integer, since each label carries g + b bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from dpfl.engine.noise import on_default_device
from dpfl.errors import SpecError

__all__ = ["MAX_EPSILON", "VectorSumParameters", "analyze", "randomize", "vector_sum_parameters"]

MAX_EPSILON = 15.0  # the theorem's range: 0 < ε ≤ 15
_B_CONSTANT = 24e4  # b = ⌈24·10⁴ g² ln²(4d/δ) / (ε² n)⌉
_P = 0.25


@dataclass(frozen=True)
class VectorSumParameters:
    """The parameters of P_vec for one round: granularity g, b noise bits of bias p, n users, bound L."""

    g: int
    b: int
    p: float
    num_users: int
    bound: float

    def coordinate_variance(self, rounding: torch.Tensor | float = 0.0) -> torch.Tensor | float:
        """Returns Var of the sum's estimate per coordinate, given Σ_i f_ij(1 − f_ij) (`rounding`, ≤ n/4)."""
        scale = (2 * self.bound / self.g) ** 2
        return scale * (rounding + self.num_users * self.b * self.p * (1 - self.p))


def vector_sum_parameters(
    *, epsilon: float, delta: float, num_users: int, dim: int, bound: float
) -> VectorSumParameters:
    """Returns the theorem's (g, b, p) for (ε, δ)-DP sums of `num_users` vectors of R^dim, ‖x‖₂ ≤ bound.

    Raises:
        SpecError: ε or δ outside the theorem's range (0 < ε ≤ 15, 0 < δ < 1/2).
    """
    if not 0 < epsilon <= MAX_EPSILON:
        raise SpecError(
            "privacy",
            f"asks the binomial vector sum for ε′ = {epsilon:.4g} in one round; Cheu et al.'s theorem "
            f"covers 0 < ε′ ≤ {MAX_EPSILON:g} (noise multiplier σ = 1/ε′ ≥ {1 / MAX_EPSILON:.4g}).",
        )
    if not 0 < delta < 0.5:
        raise SpecError(
            "privacy.delta", f"gives a per-round δ′ = {delta:.3g}; the theorem needs 0 < δ′ < 1/2."
        )
    if num_users < 1 or dim < 1:
        raise ValueError(f"need at least one user and one coordinate; got n={num_users}, d={dim}")
    g = math.ceil(max(2 * math.sqrt(num_users), math.sqrt(dim), 4))
    b = math.ceil(_B_CONSTANT * g**2 * math.log(4 * dim / delta) ** 2 / (epsilon**2 * num_users))
    return VectorSumParameters(g=g, b=b, p=_P, num_users=num_users, bound=bound)


def randomize(
    x: torch.Tensor, mask: torch.Tensor, params: VectorSumParameters, generators: Sequence[torch.Generator]
) -> torch.Tensor:
    """Returns R_vec's messages of every user, as counts of ones per label: [S, B, d] float64.

    Args:
        x: [S, B, d] the users' vectors, grouped by silo (row s is silo s's users); ‖x‖₂ ≤ bound.
        mask: [S, B] which rows are real users; padded rows send nothing (all-zero counts).
        generators: one per silo, so a silo's messages do not depend on the other silos.

    Each count is x̄_j + η_j with x̄_j ∈ {0, …, g} and η_j ∈ {0, …, b}.
    """
    s, users, d = x.shape
    if len(generators) != s:
        raise ValueError(f"need one generator per silo ({s}); got {len(generators)}")
    w = ((x.to(torch.float64) + params.bound) / (2 * params.bound)).clamp_(0.0, 1.0) * params.g
    floor = torch.floor(w)
    coins = on_default_device(
        torch.stack(
            [torch.rand(users, d, generator=gen, dtype=torch.float64, device="cpu") for gen in generators]
        )
    )
    rounded = floor + (coins < w - floor)  # E = w g, exactly
    count = torch.full((users, d), float(params.b), dtype=torch.float64, device="cpu")
    bias = torch.full_like(count, params.p)
    noise = on_default_device(torch.stack([torch.binomial(count, bias, generator=gen) for gen in generators]))
    return (rounded + noise) * mask[..., None]


def analyze(counts: torch.Tensor, params: VectorSumParameters) -> torch.Tensor:
    """Returns A_vec's estimate of Σ_i x_i [d] from the total count of ones per label [d].

    `counts` is y_j = Σ over all users of their messages' counts for label j (the shuffler's
    output reduced to what it reveals); n = params.num_users users must have sent.
    """
    n = params.num_users
    sum_w = (counts.to(torch.float64) - n * params.b * params.p) / params.g
    return 2 * params.bound * sum_w - n * params.bound

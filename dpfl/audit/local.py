"""The audit of a local randomizer: one record's message of `sdp_mbsgd`, against its ε₀.

`sdp_mbsgd` sends one message per record, the output of Duchi et al.'s ε₀-LDP ℓ2-ball
randomizer (reference/000_isrl_dp.md §3.2), and a trusted shuffler mixes a round's messages.
What one message can show is the randomizer's own guarantee: for any two inputs x, x′ in the
ball of radius C, P[M(x) ∈ S] ≤ e^ε₀ P[M(x′) ∈ S]. The shuffle's amplification (the round's
ledger ε, smaller than ε₀) is the accountant's claim about n messages mixed together and is not
something trials of one message can test; this audit says so in its `neighbours` text.

Inputs: the worst pair for a randomizer of the ball is two opposite points of its boundary,
x = +C·u and x′ = −C·u, given here as gradients of norm 1000·C, so the randomizer's own
clipping is exercised too. The trials call the algorithm's real `randomize` (its coins and its
Gaussian directions, keyed per silo and round), N messages per side in chunks over rounds, and
reduce each message to ⟨z, u⟩; the optimal test is a threshold on it (the message's density is
a function of the sign of ⟨z, x⟩ only). `statistics.epsilon_lower_bound` at δ = 0 gives the 95 %
lower bound on ε₀. No sensitivity ratio is reported (None): a local randomizer's whole
guarantee is the likelihood ratio of its messages, which the lower bound tests directly (a
broken clip shows up as a bound above ε₀).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dpfl.algorithms import Algorithm
from dpfl.errors import SpecError

__all__ = ["LOCAL_COVERAGE", "local_randomizer_audit"]

LOCAL_COVERAGE = frozenset({"sdp_mbsgd"})
"""Private algorithms whose releases are local randomizers, audited message by message."""

_CHUNK = 20_000  # messages per call: [1, chunk, P] float32 stays under ~60 MB for P ≤ 650
_CANARY_NORM = 1000.0  # the inputs' norm in units of C: far outside the ball


def local_randomizer_audit(
    algorithm: Algorithm, sigma: float | np.ndarray, *, trials: int, seed: int = 0
) -> dict[str, Any]:
    """Returns the trials of silo 0's randomizer (`statistics`: ⟨message, u⟩ on each side, which
    `statistics.epsilon_lower_bound` bounds at δ = 0) and its claimed ε₀.

    Args:
        algorithm: a prepared `sdp_mbsgd` (its `setup` is called here with `sigma`).
        sigma: the run's noise multiplier (σ = 1/ε₀), one value or one per silo.
        trials: messages per side (half choose the test, half bound it).
        seed: the audit's own key for the randomizer's coins (a round number offset).

    Raises:
        SpecError: the randomizer is not the ℓ2-ball one (`binomial` releases an (ε, δ) pair
            of Cheu et al.'s theorem for the whole round, not a per-message ε₀).
    """
    if getattr(algorithm.params, "randomizer", None) != "l2_ball":
        raise SpecError(
            "params.randomizer",
            "must be `l2_ball` for an audit: the `binomial` protocol's guarantee is a theorem about "
            "the whole round's sum, which trials of one message cannot test.",
        )
    algorithm.setup(sigma)
    claimed = float(1.0 / np.asarray(algorithm.sigmas, dtype=float)[0])
    d, clip = algorithm.layout.size, float(algorithm.params.clip)
    u = torch.zeros(d)
    u[0] = 1.0
    stats = {+1: [], -1: []}
    for side in (+1, -1):
        done, r = 0, 1_000 * (seed + 1)
        while done < trials:
            b = min(_CHUNK, trials - done)
            grads = (side * _CANARY_NORM * clip * u).expand(1, b, d).clone()
            messages = algorithm.randomize(grads, torch.ones(1, b), np.array([0]), r)
            stats[side].append((messages[0] @ u).double().numpy())
            done, r = done + b, r + 1
    return {
        "release": "silo-0 message",
        "neighbours": (
            f"inputs ±{_CANARY_NORM:g}·C·u (clipped to ±C·u); the bound is on the randomizer's ε₀, "
            "the shuffle's amplification is the accountant's claim"
        ),
        "max_sensitivity_ratio": None,
        "claimed_sensitivity": 2 * clip,  # the ball's diameter
        "noise_multiplier": float(np.asarray(algorithm.sigmas, dtype=float)[0]),
        "statistics": (np.concatenate(stats[+1]), np.concatenate(stats[-1])),
        "delta": 0.0,
        "epsilon_ledger": claimed,
    }

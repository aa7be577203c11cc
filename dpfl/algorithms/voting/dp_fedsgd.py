"""DP-FedSGD, the voting paper's instance-level baseline (reference §2.8): DP-SGD inside agents.

Each round every participating agent draws a Poisson minibatch of its records (rate
q_i = B/n_i), clips every per-example gradient to C and sends the clipped sum with its noise
share N(0, σ²C²/M) (M agents this round); the secure aggregate therefore carries N(0, σ²C²)
(MPC assumed, §1.4), the server divides by the expected total batch Σ q_i n_i and takes one
step (E = 1, as in the paper's App. D). A record of agent i is in one agent's sum only, so
each round is, for agent i's records, one Gaussian with noise multiplier σ on a Poisson
sample at rate q_i: the same ledger as ISRL-DP minibatch SGD, whose batching and plan this
reuses, but with M times less noise on the average, because only the sum is revealed.
"""

from __future__ import annotations

import math

import numpy as np

from dpfl.algorithms.base import ALGORITHMS, RoundOutput
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams
from dpfl.algorithms.voting.split import HeldOutPool, carve_public_pool
from dpfl.engine import release_noise

__all__ = ["DPFedSGD", "DPFedSGDParams"]


class DPFedSGDParams(MBSGDParams):
    public_pool: HeldOutPool = 0


@ALGORITHMS.register("dp_fedsgd")
class DPFedSGD(ISRLMinibatchSGD):
    """DP-FedSGD: one DP-SGD step per agent per round, noise shares summed by secure aggregation."""

    Params = DPFedSGDParams
    notion = "instance"
    paper = "003: Zhu et al. (baseline: DP-FedSGD, Truex et al. 2019)"
    summary = "instance-level DP-SGD in every agent, one step per round, noise on the secure sum"
    trusted = (
        "secure aggregation: each agent adds noise σC/√N, enough only in the sum over agents, which "
        "the agents are trusted to aggregate securely (simulated here)"
    )
    # Only the sum is revealed, and every record is protected by the sum's total noise, so all
    # agents share one σ (per-agent σ_i, as ISRL-DP calibrates them, would not be what protects them).
    party_of_silo = None

    def __init__(self, spec, data, model):
        super().__init__(spec, data, model)
        self.data = carve_public_pool(data, size=self.params.public_pool, seed=spec.seed).data

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray | None:
        return None  # the paper tunes σ to a budget and gives no closed form

    def conclude(self, r, silos, batch, clipped_sum, norms) -> RoundOutput:
        """Each agent adds its noise share to its clipped sum; only their sum is revealed."""
        shares = release_noise(
            clipped_sum,
            self.sigmas[silos] * self.params.clip / math.sqrt(len(silos)),
            seed=self.noise_key,
            silos=silos,
            round=r,
            secure_sum=True,
        )
        expected = float(np.sum(self.rates[silos] * self.data.silo_sizes[silos]))
        direction = (clipped_sum.sum(0) + shares.sum(0)) / expected
        self.w = self.step(self.w, direction)
        return RoundOutput(metrics=self.batch_metrics(batch, norms), releases=self.released(silos))

"""ISRL-DP FedProx-SPIDER (Alg. 3, Thm 3.1; reference/000_isrl_dp.md §3.4), the paper's own.

Rounds come in phases of length q (`phase`). At a phase start (r − 1 ≡ 0 mod q) each silo
sends a fresh noisy clipped minibatch gradient, exactly as in MB-SGD, and the server sets
v_r = mean_i h_i. Inside a phase each silo sends the noisy difference of its minibatch
gradients at the current and previous iterates, on the same Poisson minibatch, and the server
keeps the SPIDER estimate v_r = v_{r−1} + mean_i H_i; then w_{r+1} = w_r − η v_r. With q = 1
every round is a phase start and the run is MB-SGD's, draw for draw.

Sensitivity of a difference: each per-sample gradient is clipped to C at both iterates, so
one record changes the sum of differences clip(∇ℓ(w_r)) − clip(∇ℓ(w_{r−1})) by at most 2C
(add/remove). The noise std is 2σC, and the ledger's event has noise multiplier σ on that
true sensitivity. This is the experiments' choice (reference §4.2: "β unknown, so 2L bound",
σ² ×4 of a fresh gradient's); the theory's σ ∝ β‖w_r − w_{r−1}‖ needs a smoothness bound β
that a neural network does not come with. Both kinds of message are Poisson-sub-sampled
Gaussians with the same multiplier, so calibration covers them together.

No regulariser: f1 = 0, so the prox step is the plain step (the authors' code has none either).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams, clipped_by_run
from dpfl.engine import SiloBatch

__all__ = ["ISRLSpider"]


class SpiderParams(MBSGDParams):
    phase: int = Field(5, ge=1, le=10_000, description="phase length q: a fresh gradient every q rounds")


@ALGORITHMS.register("isrl_spider")
class ISRLSpider(ISRLMinibatchSGD):
    """ISRL-DP FedProx-SPIDER: fresh noisy gradients at phase starts, noisy differences in between."""

    batched = True

    Params = SpiderParams
    summary = "ISRL-DP FedProx-SPIDER: variance-reduced noisy gradients; phase 1 is MB-SGD"
    private_metrics = frozenset({"phase_start"})  # the schedule, fixed before any data is seen

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray:
        """The experiments' SPIDER-step form (reference §4.2, `spider_boost` v2): variance on the mean
        64 C² R ln(1/δ)/(n_i² ε²) for a difference of sensitivity 2C, i.e. σ_i = q_i·4√(R ln(1/δ))/ε.

        Used for both kinds of message: the code's phase-start form (16 C² ln(1/δ)/(n² ε²)) lacks
        the factor R/q and so under-protects (reference §9.6 item 5); one σ per release over the R
        releases fixes that."""
        return self.rates * 4 * math.sqrt(self.spec.rounds * math.log(1 / delta)) / epsilon

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        self.w_prev = self.w
        self.v = None

    def round(self, r: int) -> RoundOutput:
        return self.round_many([self], r)[0]

    @classmethod
    def round_many(cls, runs: Sequence[ISRLSpider], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: one gradient call with every run's silos at its w
        (and, inside a phase, again at its previous iterate); each run then releases alone."""
        chosen = [participants(run.spec, r, run.noise_key) for run in runs]
        batches = [run.batch(silos, r) for run, silos in zip(runs, chosen, strict=True)]
        inside = (r - 1) % runs[0].params.phase != 0  # runs of a batch share their phase
        points = [run.w for run in runs] + ([run.w_prev for run in runs] if inside else [])
        clipped = clipped_by_run(runs, points, batches * (2 if inside else 1))
        return [
            run.advance(r, silos, batch, clipped[i], clipped[len(runs) + i][0] if inside else None)
            for i, (run, silos, batch) in enumerate(zip(runs, chosen, batches, strict=True))
        ]

    def advance(
        self,
        r: int,
        silos: np.ndarray,
        batch: SiloBatch,
        now: tuple[torch.Tensor, torch.Tensor],
        before: torch.Tensor | None,
    ) -> RoundOutput:
        """Releases round r and steps, from the silos' clipped sums and norms at w (`now`) and,
        inside a phase, their clipped sums at the previous iterate (`before`)."""
        p = self.params
        if before is None:  # a phase start: a fresh gradient
            self.v = self.release(now[0], silos, r, sensitivity=p.clip).mean(0)
        else:
            diffs = self.release(now[0] - before, silos, r, sensitivity=2 * p.clip)
            self.v = self.v + diffs.mean(0)
        self.w_prev, self.w = self.w, self.step(self.w, self.v)
        metrics = self.batch_metrics(batch, now[1]) | {"phase_start": float(before is None)}
        return RoundOutput(metrics=metrics, releases=self.released(silos))

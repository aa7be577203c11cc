"""ISRL-DP Local SGD (reference/000_isrl_dp.md §3.7): noisy clipped local steps, models averaged.

Each participating silo starts from the server's model and takes K = `local_steps` noisy
clipped minibatch steps, w ← w − η (Σ_j clip_C(∇ℓ_j(w)) + N(0, σ²C²)) / (q_i n_i), on K
independent Poisson minibatches at rate q_i = b / n_i; it sends its final local model and the
server averages them. Every local step is a release (the final model is post-processing of
the K noisy sums), so the ledger holds SelfComposed(PoissonSampled(q_i, Gaussian(σ)), K) per
silo and round: K·R sub-sampled Gaussians per silo over a run with full participation.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams
from dpfl.engine import SiloBatch, clipped_grad_sum, gaussian_noise, silo_generator, stack_copies
from dpfl.engine.noise import SAMPLING_STREAM
from dpfl.engine.release import release_noise
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent

__all__ = ["ISRLLocalSGD"]


class LocalSGDParams(MBSGDParams):
    lr: float = Field(0.1, gt=0, le=100, description="local learning rate")
    batch_size: int = Field(32, ge=1, le=100_000, description="expected local minibatch size b per silo")
    local_steps: int = Field(5, ge=1, le=1_000, description="K noisy local steps per round")


@ALGORITHMS.register("isrl_localsgd")
class ISRLLocalSGD(ISRLMinibatchSGD):
    """ISRL-DP Local SGD: K noisy clipped local steps per silo per round, then model averaging."""

    batched = False  # its own `round`: runs of it train one by one

    Params = LocalSGDParams
    summary = "ISRL-DP Local SGD: every local step of every silo is a noisy clipped release"

    def releases_per_round(self, silo: int, sigma: float) -> list[Event]:
        step = PoissonSampledEvent(float(self.rates[silo]), GaussianEvent(float(sigma)))
        k = self.params.local_steps
        return [step if k == 1 else SelfComposedEvent(step, k)]

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray:
        """DP_FL2's per-step form (reference §4.2): variance 8 C² K R ln(2/δ)/(n_i² ε²) on a batch-1
        step, i.e. the moments-accountant form σ_i = q_i·√(8 K R ln(2/δ))/ε for K·R steps at rate q_i.

        The MNIST MATLAB generator omits the factor K and so under-protects by √K (§9.6 item 6)."""
        steps = self.params.local_steps * self.spec.rounds
        return self.rates * math.sqrt(8 * steps * math.log(2 / delta)) / epsilon

    def local_batches(self, silos: np.ndarray, r: int) -> list[SiloBatch]:
        """Returns the K Poisson minibatches of each listed silo in round r, one SiloBatch per step."""
        masks = []
        for s in silos:  # one generator per silo: a silo's draws do not depend on the others
            gen = silo_generator(self.spec.seed, int(s), r, SAMPLING_STREAM)
            masks.append(torch.rand(self.params.local_steps, len(self.data.silos[s]), generator=gen))
        rates = self.rates
        return [
            SiloBatch.from_indices(
                self.data.x_train,
                self.data.y_train,
                [self.data.silos[s][m[k] < rates[s]] for s, m in zip(silos, masks, strict=True)],
            )
            for k in range(self.params.local_steps)
        ]

    def round(self, r: int) -> RoundOutput:
        p = self.params
        silos = participants(self.spec, r)
        expected = torch.as_tensor(self.rates[silos] * self.data.silo_sizes[silos], dtype=self.w.dtype)
        stds = self.sigmas[silos] * p.clip
        # All K steps' noise is drawn at once (one generator per silo and round); each step's
        # release takes its slice.
        noise = gaussian_noise(
            (p.local_steps, self.layout.size),
            stds,
            seed=self.spec.seed,
            silos=silos,
            round=r,
        )
        local = stack_copies(self.w, len(silos))
        clip_frac, sizes = 0.0, 0.0
        for k, batch in enumerate(self.local_batches(silos, r)):
            clipped = clipped_grad_sum(self.model, self.layout, local, batch, clip=p.clip)
            step_noise = release_noise(
                clipped.sum, stds, seed=self.spec.seed, silos=silos, round=r, drawn=noise[:, k]
            )
            local = local - p.lr * (clipped.sum + step_noise) / expected[:, None]
            m = self.batch_metrics(batch, clipped.norms)
            clip_frac, sizes = clip_frac + m["clip_fraction"], sizes + m["batch_size"]
        self.w = local.mean(0)
        k = p.local_steps
        return RoundOutput(
            metrics={"clip_fraction": clip_frac / k, "batch_size": sizes / k}, releases=self.released(silos)
        )

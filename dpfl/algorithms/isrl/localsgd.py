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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams
from dpfl.engine import SiloBatch, clipped_grad_sum, gaussian_noise, silo_generator, stack_copies
from dpfl.engine.noise import SAMPLING_STREAM, on_default_device
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

    batched = True

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
            gen = silo_generator(self.noise_key, int(s), r, SAMPLING_STREAM)
            draws = torch.rand(self.params.local_steps, len(self.data.silos[s]), generator=gen, device="cpu")
            masks.append(on_default_device(draws))
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
        return self.round_many([self], r)[0]

    @classmethod
    def round_many(cls, runs: Sequence[ISRLLocalSGD], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: at each local step every run's silos are rows of one
        gradient call, each row with its own run's local model; each run then adds its own noise
        (its silos' generators) and steps its own models."""
        first, steps = runs[0], [_LocalRound.start(run, r) for run in runs]
        for k in range(first.params.local_steps):
            batches = [step.batches[k] for step in steps]
            clipped = clipped_grad_sum(
                first.model,
                first.layout,
                torch.cat([step.local for step in steps]),
                batches[0] if len(batches) == 1 else SiloBatch.concat(batches),
                clip=first.params.clip,
            )
            row = 0
            for step, batch in zip(steps, batches, strict=True):
                rows = slice(row, row + len(step.silos))
                row += len(step.silos)
                step.take(k, batch, clipped.sum[rows], clipped.norms[rows, : batch.batch_size])
        return [step.finish() for step in steps]


@dataclass
class _LocalRound:
    """One run's round in progress: its silos' local models after each noisy step so far."""

    run: ISRLLocalSGD
    r: int
    silos: np.ndarray
    expected: torch.Tensor  # each silo's expected batch size q_i n_i
    stds: np.ndarray  # each silo's noise std σ_i C
    noise: torch.Tensor  # [S, K, P]: all K steps' noise, drawn at once (one generator per silo)
    local: torch.Tensor  # [S, P]
    batches: list[SiloBatch]
    clip_fraction: float = 0.0
    batch_size: float = 0.0

    @classmethod
    def start(cls, run: ISRLLocalSGD, r: int) -> _LocalRound:
        p, silos = run.params, participants(run.spec, r, run.noise_key)
        stds = run.sigmas[silos] * p.clip
        shape = (p.local_steps, run.layout.size)
        noise = gaussian_noise(shape, stds, seed=run.noise_key, silos=silos, round=r)
        expected = torch.as_tensor(run.rates[silos] * run.data.silo_sizes[silos], dtype=run.w.dtype)
        local = stack_copies(run.w, len(silos))
        return cls(run, r, silos, expected, stds, noise, local, run.local_batches(silos, r))

    def take(self, k: int, batch: SiloBatch, clipped_sum: torch.Tensor, norms: torch.Tensor) -> None:
        """Takes local step k: each silo releases its noisy clipped sum and steps its model."""
        run = self.run
        step_noise = release_noise(
            clipped_sum, self.stds, seed=run.noise_key, silos=self.silos, round=self.r, drawn=self.noise[:, k]
        )
        self.local = self.local - run.params.lr * (clipped_sum + step_noise) / self.expected[:, None]
        metrics = run.batch_metrics(batch, norms)
        self.clip_fraction += metrics["clip_fraction"]
        self.batch_size += metrics["batch_size"]

    def finish(self) -> RoundOutput:
        """Averages the silos' models into the server's; returns the round's output."""
        run, k = self.run, self.run.params.local_steps
        run.w = self.local.mean(0)
        metrics = {"clip_fraction": self.clip_fraction / k, "batch_size": self.batch_size / k}
        return RoundOutput(metrics=metrics, releases=run.released(self.silos))

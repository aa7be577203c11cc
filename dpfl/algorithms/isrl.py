"""ISRL-DP algorithms of Lowy, Ghafelebashi & Razaviyayn (seed 000; reference/000_isrl_dp.md).

Inter-silo record-level DP: every message a silo sends is DP with respect to that silo's
records, so the server and other silos need not be trusted. Each silo is its own party in
the ledger and is accounted on its own; the run's ε is the least private silo's.

ISRL-DP MB-SGD (the paper's §4 baseline, reference §3.7 and §4.2): each round every
participating silo draws a minibatch, clips each per-sample gradient to C, adds
N(0, σ²C²) to the sum and sends the noisy mean; the server averages and steps.

Minibatches are Poisson samples at rate q_i = K / n_i (expected size K), so each release is
exactly a Poisson-sub-sampled Gaussian under add/remove-one-record and the ledger's ε is what
an accountant gives for it. (The authors' code draws fixed-size batches with replacement,
which has no tight add/remove analysis.)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import Algorithm, Params, RoundOutput, participants, register_algorithm
from dpfl.engine import clipped_grad_sum, gaussian_noise
from dpfl.engine.sampling import poisson_batch
from dpfl.errors import SpecError
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["ISRLMinibatchSGD"]


class MBSGDParams(Params):
    lr: float = Field(0.5, gt=0, le=100, description="server learning rate")
    batch_size: int = Field(64, ge=1, le=100_000, description="expected minibatch size K per silo")
    clip: float = Field(1.0, gt=0, le=1e4, description="per-sample gradient clipping norm C")


def silo_party(silo: int) -> str:
    """Returns the ledger party name of a silo."""
    return f"silo-{silo}"


@register_algorithm("isrl_mbsgd")
class ISRLMinibatchSGD(Algorithm):
    """ISRL-DP minibatch SGD: noisy clipped minibatch gradients from every silo, averaged."""

    Params = MBSGDParams
    notion = "record"
    paper = "000: Lowy, Ghafelebashi & Razaviyayn, Private Non-Convex FL Without a Trusted Server"
    summary = "ISRL-DP minibatch SGD; each silo's messages are record-level DP"

    @property
    def rates(self) -> np.ndarray:
        """Returns each silo's Poisson sampling rate q_i = min(1, K / n_i)."""
        return np.minimum(1.0, self.params.batch_size / np.maximum(self.data.silo_sizes, 1))

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        rates = self.rates
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            for s in participants(self.spec, r):
                ledger.record(
                    r, silo_party(s), PoissonSampledEvent(float(rates[s]), GaussianEvent(float(sigmas[s])))
                )
        return ledger

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray:
        """The authors' closed form (reference §4.2): noise variance on silo i's mean gradient
        8 C² R ln(2/δ) / (n_i² ε²), i.e. σ_i = K·std/C = q_i·√(8 R ln(2/δ)) / ε on the sum."""
        return self.rates * math.sqrt(8 * self.spec.rounds * math.log(2 / delta)) / epsilon

    def setup(self, noise_multiplier) -> None:
        if noise_multiplier is None:
            raise SpecError("privacy", f"is required for {self.name}: give `epsilon` or `noise_multiplier`.")
        self.sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        self.w = self.layout.flatten_module(self.model).detach().clone()

    def round(self, r: int) -> RoundOutput:
        p, spec = self.params, self.spec
        silos = participants(spec, r)
        rates = self.rates[silos]
        batch = poisson_batch(
            self.data.x_train,
            self.data.y_train,
            self.data.silos,
            silos=silos,
            rates=rates,
            seed=spec.seed,
            round=r,
        )
        clipped = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=p.clip)
        noise = gaussian_noise(
            (self.layout.size,), self.sigmas[silos] * p.clip, seed=spec.seed, silos=silos, round=r
        )
        # Divide by the expected batch size K·(n_i q_i / K): an unbiased mean, and post-processing.
        expected = torch.as_tensor(rates * self.data.silo_sizes[silos], dtype=self.w.dtype)
        messages = (clipped.sum + noise) / expected[:, None]
        self.w = self.w - p.lr * messages.mean(0)
        real = batch.mask.sum().clamp(min=1)
        clipped_frac = float(((clipped.norms > p.clip) & batch.mask).sum() / real)
        return RoundOutput(
            metrics={"clip_fraction": clipped_frac, "batch_size": float(real) / len(silos)},
            releases={
                silo_party(s): [PoissonSampledEvent(float(q), GaussianEvent(float(self.sigmas[s])))]
                for s, q in zip(silos, rates, strict=True)
            },
        )

    @property
    def global_params(self) -> torch.Tensor:
        return self.w

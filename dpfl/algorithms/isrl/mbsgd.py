"""ISRL-DP minibatch SGD (the paper's §4 baseline, reference §3.7 and §4.2), and the shared base.

Each round every participating silo draws a minibatch, clips each per-sample gradient to C,
adds N(0, σ²C²) to the sum and sends the noisy mean; the server averages and steps.

Minibatches are Poisson samples at rate q_i = K / n_i (expected size K), so each release is
exactly a Poisson-sub-sampled Gaussian under add/remove-one-record and the ledger's ε is what
an accountant gives for it. (The authors' code draws fixed-size batches with replacement,
which has no tight add/remove analysis, and clips after dividing by K and per layer; here
the whole flattened per-sample gradient is clipped before any averaging, reference §9.6.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput, participants, silo_party
from dpfl.engine import SiloBatch, clipped_grad_sum, release_noise
from dpfl.engine.sampling import PoissonSampler, float32_rate
from dpfl.errors import SpecError
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent
from dpfl.privacy.ledger import Ledger, LedgerEntry

__all__ = ["ISRLMinibatchSGD", "MBSGDParams"]


class MBSGDParams(Params):
    lr: float = Field(0.5, gt=0, le=100, description="server learning rate")
    batch_size: int = Field(64, ge=1, le=100_000, description="expected minibatch size K per silo")
    clip: float = Field(1.0, gt=0, le=1e4, description="per-sample gradient clipping norm C")


@ALGORITHMS.register("isrl_mbsgd")
class ISRLMinibatchSGD(Algorithm):
    """ISRL-DP minibatch SGD: noisy clipped minibatch gradients from every silo, averaged.

    Subclasses reuse `release` (one noisy clipped minibatch sum per silo) and override `step`
    (the server's update from the averaged message) or `round`.
    """

    Params = MBSGDParams
    notion = "record"
    paper = "000: Lowy, Ghafelebashi & Razaviyayn, Private Non-Convex FL Without a Trusted Server"
    summary = "ISRL-DP minibatch SGD; each silo's messages are record-level DP"
    # A silo's releases carry its own σ_i only and it is accounted on its own (ISRL-DP), so
    # each silo is calibrated to its own ledger: larger silos sample less and need less noise.
    party_of_silo = staticmethod(silo_party)
    batched = True

    @functools.cached_property
    def rates(self) -> np.ndarray:
        """Returns each silo's Poisson sampling rate q_i = min(1, K / n_i), as its float32 draws realise
        it (`float32_rate`; computed once: a plan asks for it per silo per round)."""
        return float32_rate(np.minimum(1.0, self.params.batch_size / np.maximum(self.data.silo_sizes, 1)))

    def releases_per_round(self, silo: int, sigma: float) -> list[Event]:
        """Returns what `silo` releases in one round it takes part in, under noise multiplier σ."""
        return [PoissonSampledEvent(float(self.rates[silo]), GaussianEvent(float(sigma)))]

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        # a silo releases the same events every round it takes part in: made once per plan, as
        # calibration asks for hundreds of plans
        releases = [self.releases_per_round(s, float(sigma)) for s, sigma in enumerate(sigmas)]
        parties = [silo_party(s) for s in range(len(sigmas))]
        return Ledger(
            LedgerEntry(r, parties[s], event)
            for r in range(1, self.spec.rounds + 1)
            for s in participants(self.spec, r, self.noise_key).tolist()
            for event in releases[s]
        )

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray:
        """The authors' closed form (reference §4.2): noise variance on silo i's mean gradient
        8 C² R ln(2/δ) / (n_i² ε²), i.e. σ_i = K·std/C = q_i·√(8 R ln(2/δ)) / ε on the sum."""
        return self.rates * math.sqrt(8 * self.spec.rounds * math.log(2 / delta)) / epsilon

    def setup(self, noise_multiplier) -> None:
        if noise_multiplier is None:
            raise SpecError("privacy", f"is required for {self.name}: give `epsilon` or `noise_multiplier`.")
        self.sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        self.w = self.layout.flatten_module(self.model).detach().clone()

    @functools.cached_property
    def sampler(self) -> PoissonSampler:
        """Returns the sampler of every silo's records at its rate q_i."""
        return PoissonSampler(self.data.x_train, self.data.y_train, self.data.silos, self.rates)

    def batch(self, silos: np.ndarray, r: int) -> SiloBatch:
        """Returns round r's Poisson minibatch of each listed silo."""
        return self.sampler.batch(silos, seed=self.noise_key, round=r)

    def release(
        self, clipped_sum: torch.Tensor, silos: np.ndarray, r: int, *, sensitivity: float
    ) -> torch.Tensor:
        """Returns each silo's message: (clipped sum + N(0, σ_i²Δ²)) / (q_i n_i), [S, P].

        Δ = `sensitivity` is the L2 sensitivity of one silo's sum to adding or removing one
        record (C for a sum of gradients clipped to C); σ_i is the silo's noise multiplier.
        Dividing by the expected batch size q_i n_i gives an unbiased mean (post-processing).
        """
        noise = release_noise(
            clipped_sum, self.sigmas[silos] * sensitivity, seed=self.noise_key, silos=silos, round=r
        )
        expected = torch.as_tensor(self.rates[silos] * self.data.silo_sizes[silos], dtype=self.w.dtype)
        return (clipped_sum + noise) / expected[:, None]

    def step(self, w: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        """Returns the server's next model from w and the averaged message: w − η·direction."""
        return w - self.params.lr * direction

    def round(self, r: int) -> RoundOutput:
        silos = participants(self.spec, r, self.noise_key)
        batch = self.batch(silos, r)
        clipped = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=self.params.clip)
        return self.conclude(r, silos, batch, clipped.sum, clipped.norms)

    def conclude(
        self, r: int, silos: np.ndarray, batch: SiloBatch, clipped_sum: torch.Tensor, norms: torch.Tensor
    ) -> RoundOutput:
        """Returns round r's output once the silos' clipped sums [S, P] (and per-sample norms
        [S, B]) are known: each silo releases its noisy mean, and the server steps."""
        messages = self.release(clipped_sum, silos, r, sensitivity=self.params.clip)
        self.w = self.step(self.w, messages.mean(0))
        return RoundOutput(metrics=self.batch_metrics(batch, norms), releases=self.released(silos))

    @classmethod
    def round_many(cls, runs: Sequence[ISRLMinibatchSGD], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: every run's silos are rows of one gradient call, each
        row with its own run's model; then each run `conclude`s under its own σ and generators.
        A subclass that changes `round` itself is not `batched`, and loops."""
        if not cls.batched or len(runs) == 1:
            return super().round_many(runs, r)
        chosen = [participants(run.spec, r, run.noise_key) for run in runs]
        batches = [run.batch(silos, r) for run, silos in zip(runs, chosen, strict=True)]
        clipped = clipped_by_run(runs, [run.w for run in runs], batches)
        return [
            run.conclude(r, silos, batch, *sums)
            for run, silos, batch, sums in zip(runs, chosen, batches, clipped, strict=True)
        ]

    def batch_metrics(self, batch: SiloBatch, norms: torch.Tensor) -> dict[str, float]:
        """Returns the fraction of clipped samples and the mean real batch size per silo."""
        real = batch.mask.sum().clamp(min=1)
        clipped_frac = float(((norms > self.params.clip) & batch.mask).sum() / real)
        return {"clip_fraction": clipped_frac, "batch_size": float(real) / batch.num_silos}

    def released(self, silos: np.ndarray) -> dict[str, list[Event]]:
        """Returns one round's releases of each listed silo, as the plan has them."""
        return {silo_party(s): self.releases_per_round(int(s), float(self.sigmas[s])) for s in silos}

    @property
    def global_params(self) -> torch.Tensor:
        return self.w


def clipped_by_run(
    runs: Sequence[ISRLMinibatchSGD], points: Sequence[torch.Tensor], batches: Sequence[SiloBatch]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Returns, for each (model [P], batch) pair, its silos' clipped gradient sums [S, P] and
    per-sample norms [S, B]. For a batch of runs every pair's silos are rows of one gradient
    call, each row at its own pair's model; one run makes a call per pair at its model [P], as
    it does alone."""
    run = runs[0]
    if len(runs) == 1:
        alone = [
            clipped_grad_sum(run.model, run.layout, w, b, clip=run.params.clip)
            for w, b in zip(points, batches, strict=True)
        ]
        return [(c.sum, c.norms) for c in alone]
    models = torch.cat([w.expand(batch.num_silos, -1) for w, batch in zip(points, batches, strict=True)])
    clipped = clipped_grad_sum(run.model, run.layout, models, SiloBatch.concat(batches), clip=run.params.clip)
    out, row = [], 0
    for batch in batches:
        rows = slice(row, row + batch.num_silos)
        row += batch.num_silos
        out.append((clipped.sum[rows], clipped.norms[rows, : batch.batch_size]))
    return out

"""Planted privacy bugs, as a plugin module (`DPFL_PLUGINS=tests.planted_bugs`): ISRL-DP MB-SGD
(and SPIDER) with one mistake each, the kind a code review misses. Each keeps the correct
algorithm's ledger and its audit coverage, so only what it actually releases is wrong. The
auditor must prove a violation for every bug whose true ε is at least 1.5× its ledger's
(tests/dpfl/audit/test_planted_bugs.py; power and time in docs/benchmarks.md, from
benchmarks/audit_bugs.py).

`TRUE_EPSILON` says, per bug, what its releases are worth, in words the benchmark turns into a
number for its setting.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.algorithms.isrl.spider import ISRLSpider
from dpfl.audit.coverage import Coverage, all_records
from dpfl.audit.neighbours import dirac_neighbours, record_neighbours
from dpfl.engine import clipped_grad_sum, release_noise
from dpfl.engine.noise import gaussian_noise
from dpfl.engine.sampling import PoissonSampler

RECORDS = Coverage(record_neighbours, all_records, black_box=dirac_neighbours)

TRUE_EPSILON: dict[str, str] = {}
"""Each bug's true privacy, for the benchmark: "noise ×f" (the ledger's events at σ·f), "rate ×f"
(sampling at f·q), "rounds ×f" (f times the ledger's releases), "sensitivity ×f" (a release's
true sensitivity f times its noise's), or "unbounded" (a noiseless function of the data is
released)."""


def _bug(name: str, true_epsilon: str):
    def register(cls):
        cls.audit_coverage = RECORDS
        cls.batched = False  # each bug is in its own `round`; trials loop over runs
        TRUE_EPSILON[name] = true_epsilon
        return ALGORITHMS.register(name)(cls)

    return register


def _expected(run: ISRLMinibatchSGD, silos: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(run.rates[silos] * run.data.silo_sizes[silos], dtype=run.w.dtype)[:, None]


def _noise(run: ISRLMinibatchSGD, clipped_sum, silos, sensitivity, *, seed: int, round: int) -> torch.Tensor:
    std = run.sigmas[silos] * sensitivity
    return release_noise(clipped_sum, std, seed=seed, silos=silos, round=round)


@_bug("bug_half_noise_after", "noise ×0.5")
class HalfNoiseAfter(ISRLMinibatchSGD):
    """Halves the noise `release_noise` returned: the tap records σC, the run adds σC/2."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        noise = _noise(self, clipped_sum, silos, sensitivity, seed=self.noise_key, round=r)
        return (clipped_sum + noise / 2) / _expected(self, silos)


@_bug("bug_noise_outside", "noise ×0.33")
class NoiseOutside(ISRLMinibatchSGD):
    """Calls `release_noise` (so the tap records σC) but adds noise of its own draw at σC/3."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        std = self.sigmas[silos] * sensitivity
        release_noise(clipped_sum, std, seed=self.noise_key, silos=silos, round=r)
        shape = tuple(clipped_sum.shape[1:])
        own = gaussian_noise(shape, std / 3, seed=self.noise_key, silos=silos, round=r, stream=7)
        return (clipped_sum + own) / _expected(self, silos)


@_bug("bug_clip_round_one", "unbounded")
class ClipRoundOne(ISRLMinibatchSGD):
    """Clips per-sample gradients in round 1 only; later rounds sum them unclipped."""

    def round(self, r: int) -> RoundOutput:
        silos = participants(self.spec, r, self.noise_key)
        batch = self.batch(silos, r)
        clip = self.params.clip if r == 1 else 1e30
        clipped = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=clip)
        return self.conclude(r, silos, batch, clipped.sum, clipped.norms)


@_bug("bug_double_rate", "rate ×2")
class DoubleRate(ISRLMinibatchSGD):
    """Samples records at 2q while its ledger says q."""

    @functools.cached_property
    def sampler(self) -> PoissonSampler:
        data = self.data
        return PoissonSampler(data.x_train, data.y_train, data.silos, np.minimum(1.0, 2 * self.rates))


@_bug("bug_same_noise", "unbounded")
class SameNoise(ISRLMinibatchSGD):
    """Draws round 1's noise in every round (the generator keyed without the round)."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        noise = _noise(self, clipped_sum, silos, sensitivity, seed=self.noise_key, round=1)
        return (clipped_sum + noise) / _expected(self, silos)


@_bug("bug_public_seed", "unbounded")
class PublicSeed(ISRLMinibatchSGD):
    """Keys its noise by the spec's public seed instead of the run's secret key: anyone with the
    spec regenerates it."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        noise = _noise(self, clipped_sum, silos, sensitivity, seed=self.spec.seed, round=r)
        return (clipped_sum + noise) / _expected(self, silos)


@_bug("bug_ledger_skips_even", "rounds ×2")
class LedgerSkipsEven(ISRLMinibatchSGD):
    """Releases every round but records no event in even rounds."""

    def round(self, r: int) -> RoundOutput:
        out = super().round(r)
        return out if r % 2 else RoundOutput(metrics=out.metrics, releases={})


@_bug("bug_spider_difference", "sensitivity ×2")
class SpiderDifference(ISRLSpider):
    """Noises SPIDER's differences for C, where one record moves a difference by up to 2C."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        return super().release(clipped_sum, silos, r, sensitivity=self.params.clip)


@_bug("bug_no_clip", "unbounded")
class NoClip(ISRLMinibatchSGD):
    """Never clips: noise for C on a sum whose records may be of any norm."""

    def round(self, r: int) -> RoundOutput:
        silos = participants(self.spec, r, self.noise_key)
        batch = self.batch(silos, r)
        clipped = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=1e30)
        return self.conclude(r, silos, batch, clipped.sum, clipped.norms)


@_bug("bug_half_std", "noise ×0.5")
class HalfStd(ISRLMinibatchSGD):
    """Adds (and reports) σC/2 while its ledger says σ."""

    def release(self, clipped_sum, silos, r, *, sensitivity):
        return super().release(clipped_sum, silos, r, sensitivity=sensitivity / 2)

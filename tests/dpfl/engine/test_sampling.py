"""PoissonSampler: each silo's records kept at its own rate, from its own generator."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from dpfl.engine.noise import SAMPLING_STREAM, silo_generator
from dpfl.engine.sampling import PoissonSampler, float32_rate, float32_rate_below

SIZES = (300, 120, 0, 451)
RATES = np.array([0.1, 0.5, 0.3, 0.02])


def _sampler() -> PoissonSampler:
    n = sum(SIZES)
    x = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 3)  # a record's features are its index
    y = torch.arange(n) % 7
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    starts = np.cumsum((0, *SIZES))
    silos = [perm[a:b] for a, b in itertools.pairwise(starts)]
    return PoissonSampler(x, y, silos, RATES)


def _kept(batch, row: int) -> list[int]:
    return batch.x[row, batch.mask[row], 0].long().tolist()


def test_a_silo_keeps_each_record_whose_own_draw_is_below_its_rate():
    sampler = _sampler()
    batch = sampler.batch([0, 1, 2, 3], seed=5, round=7)
    for row, silo in enumerate(range(4)):
        records = sampler.silo_indices[silo]
        draws = torch.rand(len(records), generator=silo_generator(5, silo, 7, SAMPLING_STREAM))
        assert _kept(batch, row) == records[draws < float(RATES[silo])].tolist()
        assert batch.y[row, batch.mask[row]].tolist() == [r % 7 for r in _kept(batch, row)]
    assert not batch.x[~batch.mask].any() and not batch.y[~batch.mask].any()  # padding is zero


def test_a_silos_sample_does_not_depend_on_the_other_silos_listed():
    sampler = _sampler()
    everyone = sampler.batch([0, 1, 2, 3], seed=1, round=2)
    some = sampler.batch([3, 1], seed=1, round=2)
    assert _kept(some, 0) == _kept(everyone, 3) and _kept(some, 1) == _kept(everyone, 1)
    assert some.counts().tolist() == [everyone.counts()[3], everyone.counts()[1]]


def test_records_are_kept_at_their_silos_rates():
    sampler = _sampler()
    counts = torch.stack([sampler.batch([0, 1, 2, 3], seed=0, round=r).counts() for r in range(400)]).double()
    expected = torch.tensor(SIZES, dtype=torch.float64) * torch.tensor(RATES)
    sd = (expected * (1 - torch.tensor(RATES)) / 400).sqrt()
    assert counts[:, 2].max() == 0
    assert ((counts.mean(0) - expected).abs() <= 5 * sd + 1e-12).all(), (counts.mean(0), expected)


def test_the_ledgers_rate_is_what_float32_draws_realise():
    # torch's float32 uniform draws carry 24 random bits: multiples of 2^-24 in [0, 1)
    draws = torch.rand(1_000_000, generator=torch.Generator().manual_seed(3)).double() * 2**24
    assert torch.equal(draws, draws.round()) and draws.min() >= 0 and draws.max() < 2**24
    q = np.array([64 / 2253, 128 / 2540, 0.05, 0.0125, 1 / 3, 2**-10, 1.0])
    rate = float32_rate(q)
    assert np.all(np.abs(rate - q) < 2**-24)
    assert np.array_equal(rate, rate.astype(np.float32).astype(np.float64))  # exact in float32
    assert np.array_equal(rate * 2**24, np.round(rate * 2**24))
    # P(u < q) = ⌈q·2²⁴⌉/2²⁴ exactly: every 24-bit u is kept against q as against the rate, and the
    # number of kept values is rate·2²⁴
    u = torch.arange(2**24, dtype=torch.float32) / 2**24
    for qi, ri in zip(q, rate, strict=True):
        kept = u < torch.tensor(qi, dtype=torch.float32)
        assert torch.equal(kept, u < torch.tensor(ri, dtype=torch.float32))
        assert int(kept.sum()) == round(ri * 2**24)
    assert rate[2] > 0.05  # 0.05 itself is no multiple of 2^-24: its records were kept a little more often


def test_a_coin_bounded_by_a_guarantee_never_comes_up_more_often_than_it():
    eps0 = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 30.0])
    p = 1.0 / (1.0 + np.exp(-eps0))  # an ε₀-LDP randomiser's largest probability of keeping a side
    t = float32_rate_below(p)
    u = torch.arange(2**24, dtype=torch.float32) / 2**24  # every value a float32 draw can take
    for pi, ti in zip(p, t, strict=True):
        realised = int((u < torch.tensor(ti, dtype=torch.float32)).sum()) / 2**24
        assert realised == ti <= pi and pi - ti < 2**-24
    # against p itself, the float32 coin comes up more often than p allows for some of these
    over = [int((u < torch.tensor(pi, dtype=torch.float32)).sum()) / 2**24 > pi for pi in p]
    assert any(over)

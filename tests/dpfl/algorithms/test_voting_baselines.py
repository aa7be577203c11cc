"""The voting paper's gradient baselines: DP-FedAvg (agent level) and DP-FedSGD (instance level)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch

from dpfl.algorithms import participants
from dpfl.engine import clipped_grad_sum
from dpfl.errors import SpecError
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent
from dpfl.runner import prepare, run
from dpfl.spec import parse_spec

DELTA = 1e-3


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two shared cores: oversubscribed intra-op threads stall
    yield
    torch.set_num_threads(threads)


def _spec(algorithm: str, params: dict, privacy: dict, **overrides):
    return parse_spec(
        {
            "algorithm": algorithm,
            "params": params,
            "dataset": {"name": "digits", "silos": 10},
            "model": {"name": "mlp", "hidden": [32]},
            "rounds": 20,
            "eval_every": 10,
            "privacy": privacy,
            "seed": 0,
        }
        | overrides
    )


def _fedavg(**params):
    base = {
        "lr": 0.1,
        "local_steps": 5,
        "batch_size": 32,
        "sample_rate": 0.5,
        "clip": 1.0,
        "public_pool": 100,
    }
    return base | params


def test_dp_fedavg_ledger_is_one_poisson_sampled_gaussian_per_round_and_meets_the_target():
    result = run(_spec("dp_fedavg", _fedavg(), {"epsilon": 5.0, "delta": DELTA}, rounds=10))
    sigma = result.privacy.noise_multiplier
    assert result.ledger.parties == ["agents"] and result.privacy.notion == "agent"
    assert [e.event for e in result.ledger.entries] == [PoissonSampledEvent(0.5, GaussianEvent(sigma))] * 10
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(sigma)), 10)
    assert result.epsilon == pytest.approx(5.0, rel=1e-3)
    assert acc.get_epsilon(DELTA) == pytest.approx(5.0, rel=2e-2)  # dp_accounting's own order grid
    # The 100 held-out test records are the voting methods' public pool: evaluation uses the other 259.
    assert len(prepare(_spec("dp_fedavg", _fedavg(), {"epsilon": 5.0, "delta": DELTA})).data.y_test) == 259


def test_dp_fedavg_samples_agents_from_the_seed_and_learns_with_little_noise():
    spec = _spec("dp_fedavg", _fedavg(), {"noise_multiplier": 0.05, "delta": DELTA}, rounds=30)
    algorithm = prepare(spec)
    counts = [len(algorithm.sampled(r)) for r in range(1, 201)]
    assert np.mean(counts) == pytest.approx(5.0, abs=0.4)  # q·N = 0.5 × 10
    assert algorithm.sampled(3).tolist() == prepare(spec).sampled(3).tolist()
    a, b = run(spec), run(spec)
    assert [r.accuracy for r in a.rounds] == [r.accuracy for r in b.rounds]
    assert a.final.accuracy > 0.85


def test_adaptive_clipping_splits_the_noise_and_tracks_the_quantile():
    params = _fedavg(adaptive_clip=True, count_noise=2.0, clip=0.01, clip_lr=0.5, target_quantile=0.5)
    algorithm = prepare(_spec("dp_fedavg", params, {"noise_multiplier": 1.5, "delta": DELTA}))
    algorithm.setup(1.5)
    # Andrew et al. Thm 1: updates at σ_Δ and the centred count at σ_b add up to one Gaussian at σ.
    assert algorithm.update_sigma**-2 + (2 * 2.0) ** -2 == pytest.approx(1.5**-2)
    clips = []
    for r in range(1, 16):
        clips.append(algorithm.round(r).metrics["clip"])
    assert clips[0] == 0.01 and clips[-1] > 0.1  # every update is clipped at first, so S grows
    # Start far above every update norm (a small server step keeps the noise σ_Δ·S from blowing
    # the model up): nothing is clipped, so S shrinks by about e^{−η_C/2} a round.
    loose = params | {"clip": 100.0, "server_lr": 1e-4}
    shrunk = prepare(_spec("dp_fedavg", loose, {"noise_multiplier": 1.5, "delta": DELTA}))
    shrunk.setup(1.5)
    assert [shrunk.round(r).metrics["clip"] for r in range(1, 16)][-1] < 10.0
    weak = prepare(
        _spec("dp_fedavg", params | {"count_noise": 0.5}, {"noise_multiplier": 1.5, "delta": DELTA})
    )
    with pytest.raises(SpecError) as info:
        weak.setup(1.5)
    assert str(info.value) == (
        "`params.count_noise` must be > σ/2 = 0.75 so that the update noise stays finite "
        "(σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½)); got 0.5."
    )


def test_dp_fedavg_refuses_participation():
    with pytest.raises(
        SpecError, match=r"^`participation` is not used by dp_fedavg: agents are Poisson-sampled"
    ):
        prepare(_spec("dp_fedavg", _fedavg(), {"epsilon": 5.0, "delta": DELTA}, participation=5))


def test_dp_fedsgd_accounts_like_isrl_mbsgd_but_adds_the_noise_once_to_the_sum():
    params = {"lr": 0.5, "batch_size": 32, "clip": 1.0}
    fedsgd = run(_spec("dp_fedsgd", params, {"noise_multiplier": 2.0, "delta": DELTA}, rounds=3))
    isrl = run(_spec("isrl_mbsgd", params, {"noise_multiplier": 2.0, "delta": DELTA}, rounds=3))
    assert fedsgd.ledger.to_json() == isrl.ledger.to_json() and fedsgd.privacy.notion == "instance"
    # One round by hand: w1 = w0 − η (Σ clipped sums + noise) / Σ q_i n_i, the noise N(0, σ²C²).
    spec = _spec("dp_fedsgd", params, {"noise_multiplier": 2.0, "delta": DELTA}, rounds=1)
    algorithm = prepare(spec)
    algorithm.setup(2.0)
    w0 = algorithm.global_params.clone()
    silos = participants(spec, 1, spec.seed)
    clipped = clipped_grad_sum(algorithm.model, algorithm.layout, w0, algorithm.batch(silos, 1), clip=1.0)
    algorithm.round(1)
    expected = float(np.sum(algorithm.rates * algorithm.data.silo_sizes))
    noise = (w0 - algorithm.global_params) * expected / 0.5 - clipped.sum.sum(0)
    assert float(noise.std()) == pytest.approx(2.0, rel=0.05)  # not 2·√10: the shares add to σC
    assert abs(float(noise.mean())) < 0.1


def test_dp_fedsgd_calibrates_one_sigma_for_all_agents_and_learns():
    spec = _spec(
        "dp_fedsgd",
        {"lr": 0.5, "batch_size": 32, "clip": 1.0},
        {"epsilon": 3.0, "delta": 1e-5},
        dataset={
            "name": "digits",
            "silos": 3,
            "partition": {"kind": "quantity", "alpha": 2.0, "min_size": 200},
        },
        rounds=30,
    )
    result = run(spec)
    assert isinstance(result.privacy.noise_multiplier, float)  # the sum's noise protects every agent
    assert result.epsilon == pytest.approx(3.0, rel=1e-3)
    assert result.final.accuracy > 0.6  # measured 0.67 (chance 0.1)
    assert math.isfinite(result.final.loss)

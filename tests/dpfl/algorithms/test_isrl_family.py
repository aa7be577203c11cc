"""The ISRL-DP family (reference/000_isrl_dp.md): MB-SGD, SPIDER, prox-SGD, Local SGD and shuffle DP."""

from __future__ import annotations

from pathlib import Path

import dp_accounting
import numpy as np
import pytest
import torch

from dpfl.algorithms import participants
from dpfl.algorithms.isrl import ISRLMinibatchSGD, SDPMinibatchSGD
from dpfl.algorithms.isrl.prox import prox
from dpfl.algorithms.isrl.shuffle import l2_ball_randomizer_radius
from dpfl.engine import clipped_grad_sum
from dpfl.engine.sampling import float32_rate
from dpfl.privacy.calibration import calibrate_noise_multiplier
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent, ShuffleEvent
from dpfl.privacy.ledger import Ledger
from dpfl.privacy.shuffle import shuffle_epsilon
from dpfl.runner import prepare, project, run
from dpfl.spec import load_spec, parse_spec
from tests.factories import data_dir, isrl_digits_spec

DELTA = 1e-5


def _trajectory(spec, sigma: float, rounds: int) -> tuple[list[torch.Tensor], Ledger]:
    algorithm = prepare(spec)
    algorithm.setup(sigma)
    ledger, models = Ledger(), []
    for r in range(1, rounds + 1):
        ledger.record_round(r, algorithm.round(r).releases)
        models.append(algorithm.global_params.clone())
    return models, ledger


def test_spider_with_phase_1_is_mbsgd_exactly():
    params = {"lr": 0.5, "batch_size": 64, "clip": 1.0}
    mbsgd = isrl_digits_spec(rounds=5, params=params, participation=6)
    spider = isrl_digits_spec(
        rounds=5, params=params | {"phase": 1}, participation=6, algorithm="isrl_spider"
    )
    a_models, a_ledger = _trajectory(mbsgd, 0.8, 5)
    b_models, b_ledger = _trajectory(spider, 0.8, 5)
    assert all(torch.equal(a, b) for a, b in zip(a_models, b_models, strict=True))
    assert a_ledger.to_json() == b_ledger.to_json()
    a, b = run(mbsgd), run(spider)
    assert [(r.loss, r.accuracy) for r in a.rounds] == [(r.loss, r.accuracy) for r in b.rounds]
    assert a.ledger.to_json() == b.ledger.to_json() and a.epsilon == b.epsilon


def test_spider_differences_move_the_model_off_mbsgd_and_are_accounted_like_fresh_gradients():
    params = {"lr": 0.5, "batch_size": 64, "clip": 1.0}
    mbsgd = isrl_digits_spec(rounds=4, params=params)
    spider = isrl_digits_spec(rounds=4, params=params | {"phase": 2}, algorithm="isrl_spider")
    a_models, a_ledger = _trajectory(mbsgd, 0.8, 4)
    b_models, b_ledger = _trajectory(spider, 0.8, 4)
    assert torch.equal(a_models[0], b_models[0])  # round 1 is a phase start
    assert not torch.equal(a_models[1], b_models[1])  # round 2 sends a noisy difference
    # Both kinds of message carry noise multiplier σ on their own sensitivity (C and 2C).
    assert a_ledger.to_json() == b_ledger.to_json()


def test_localsgd_ledger_has_k_events_per_silo_per_round_and_matches_dp_accounting():
    k, rounds = 3, 4
    result = run(
        isrl_digits_spec(
            algorithm="isrl_localsgd",
            rounds=rounds,
            eval_every=rounds,
            params={"lr": 0.2, "batch_size": 32, "clip": 1.0, "local_steps": k},
        )
    )
    entries = result.ledger.entries
    assert len(entries) == 10 * rounds  # one entry per silo and round ...
    assert all(
        isinstance(e.event, SelfComposedEvent) and e.event.count == k for e in entries
    )  # ... of K steps
    # Each silo has its own σ_i (digits splits into silos of 144 and 143 records).
    sigmas = np.asarray(result.privacy.noise_multiplier)
    # the rate its float32 draws realise (q = 32 / n rounded to a multiple of 2^-24)
    rates = float32_rate(np.minimum(1.0, 32 / result.label_histogram.sum(axis=1)))
    assert len(set(sigmas.tolist())) == 2
    per_silo = []
    for q, sigma in zip(rates, sigmas, strict=True):
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), k * rounds)
        per_silo.append(acc.get_epsilon(DELTA))
    assert result.epsilon == pytest.approx(max(per_silo), rel=1e-9)
    assert max(per_silo) <= 3.0 and min(per_silo) == pytest.approx(3.0, rel=1e-3)


def _quantity_spec(silos: int, partition: dict | None = None):
    """Returns MB-SGD on digits split into silos of unequal size (quantity skew), ε = 2, 5 rounds."""
    partition = partition or {"kind": "quantity", "alpha": 2.0, "min_size": 200}
    return isrl_digits_spec(
        rounds=5,
        eval_every=5,
        dataset={"name": "digits", "silos": silos, "partition": partition},
        params={"lr": 0.5, "batch_size": 32, "clip": 1.0},
        privacy={"epsilon": 2.0, "delta": DELTA},
    )


def test_each_silo_gets_the_smallest_sigma_its_own_ledger_needs():
    result = run(_quantity_spec(2))
    sizes = result.label_histogram.sum(axis=1)
    sigmas = np.asarray(result.privacy.noise_multiplier)
    assert sizes.tolist() == [881, 557]
    assert sigmas[0] < sigmas[1]  # the larger silo samples at a lower rate and needs less noise
    assert sigmas.tolist() == pytest.approx([0.9187, 1.0189], abs=1e-4)
    curves = result.ledger.epsilon_curves(delta=DELTA)
    for silo, sigma in enumerate(sigmas):
        assert curves[f"silo-{silo}"][-1] <= 2.0  # every silo's own ledger meets the target ...
        less = prepare(_quantity_spec(2)).plan(np.where(np.arange(2) == silo, sigma * (1 - 1e-3), sigmas))
        assert less.epsilon_curves(delta=DELTA)[f"silo-{silo}"][-1] > 2.0  # ... and 1e-3 less noise fails
    assert result.epsilon == pytest.approx(2.0, rel=1e-3)
    assert result.to_json()["privacy"]["noise_multiplier"] == sigmas.tolist()


def test_equal_silos_get_one_sigma_equal_to_the_shared_calibration():
    algorithm = prepare(_quantity_spec(2, partition={"kind": "iid"}))
    assert algorithm.data.silo_sizes.tolist() == [719, 719]
    sigma = project(algorithm).noise_multiplier
    shared = calibrate_noise_multiplier(
        lambda s: list(algorithm.plan(s).party_events().values()), target_epsilon=2.0, target_delta=DELTA
    )
    assert isinstance(sigma, float) and sigma == shared


def test_shuffle_dp_keeps_one_sigma_for_all_silos():
    # The shuffled messages of all silos amplify each other only if every silo uses the same ε0.
    assert SDPMinibatchSGD.party_of_silo is None and ISRLMinibatchSGD.party_of_silo(3) == "silo-3"


def test_localsgd_step_noise_has_the_ledgers_noise_multiplier():
    # One silo, one step: the update is −η (clipped sum + noise) / (q n), so the noise is recoverable.
    spec = isrl_digits_spec(
        algorithm="isrl_localsgd",
        rounds=1,
        participation=1,
        params={"lr": 0.1, "batch_size": 32, "clip": 1.0, "local_steps": 1},
    )
    algorithm = prepare(spec)
    algorithm.setup(2.0)
    silos = participants(spec, 1, spec.seed)
    w0 = algorithm.global_params.clone()
    (batch,) = algorithm.local_batches(silos, 1)
    clipped = clipped_grad_sum(algorithm.model, algorithm.layout, w0, batch, clip=1.0).sum[0]
    out = algorithm.round(1)
    expected = algorithm.rates[silos[0]] * algorithm.data.silo_sizes[silos[0]]
    noise = (w0 - algorithm.global_params) * expected / 0.1 - clipped
    assert float(noise.std()) == pytest.approx(2.0, rel=0.05)  # std σC with C = 1, over P ≈ 4.8k draws
    (events,) = out.releases.values()
    assert events == [PoissonSampledEvent(float(algorithm.rates[silos[0]]), GaussianEvent(2.0))]


@pytest.mark.parametrize("radius", [0.5, 3.0])
def test_proxsgd_keeps_every_iterate_in_the_l2_ball(radius):
    spec = isrl_digits_spec(
        algorithm="isrl_proxsgd",
        rounds=6,
        params={"lr": 0.5, "batch_size": 64, "clip": 1.0, "prox": "l2_ball", "radius": radius},
    )
    models, _ = _trajectory(spec, 0.5, 6)
    norms = [float(torch.linalg.vector_norm(w)) for w in models]
    assert max(norms) <= radius * (1 + 1e-6)
    assert norms[-1] == pytest.approx(radius, rel=1e-5)  # noisy steps push it to the boundary


def test_prox_operators():
    v = torch.tensor([3.0, -0.05, 0.5, -4.0])
    assert torch.allclose(
        prox(v, kind="l1", lr=0.5, strength=0.2, radius=1), torch.tensor([2.9, 0.0, 0.4, -3.9])
    )
    assert torch.allclose(prox(v, kind="l2", lr=0.5, strength=2.0, radius=1), v / 2)
    ball = prox(v, kind="l2_ball", lr=0.5, strength=0, radius=1.0)
    assert float(torch.linalg.vector_norm(ball)) == pytest.approx(1.0) and torch.allclose(ball, v / v.norm())
    inside = torch.tensor([0.1, 0.2])
    assert torch.equal(prox(inside, kind="l2_ball", lr=1, strength=0, radius=1.0), inside)


def test_l2_ball_randomizer_is_unbiased_and_bounded():
    algorithm = prepare(isrl_digits_spec(algorithm="sdp_mbsgd", rounds=1))
    algorithm.setup(0.5)  # ε0 = 2
    d, n = 8, 20_000
    x = torch.tensor([0.3, -0.4] + [0.0] * (d - 2))  # ‖x‖ = 0.5 < C = 1
    grads = x.expand(4, n // 4, d).clone()
    z = algorithm.randomize(grads, torch.ones(4, n // 4, dtype=torch.bool), np.array([0, 1, 2, 3]), 1)
    b = l2_ball_randomizer_radius(clip=1.0, local_epsilon=2.0, dim=d)
    assert torch.allclose(torch.linalg.vector_norm(z, dim=-1), torch.tensor(b))  # every message on the sphere
    assert torch.allclose(z.reshape(-1, d).mean(0), x, atol=0.06)  # E[Z] = x; std of the mean ≈ b/√(nd)
    big = torch.zeros(1, 2, d)
    big[0, :, 0] = 100.0  # clipped to C = 1 first
    assert float(
        torch.linalg.vector_norm(algorithm.randomize(big, torch.ones(1, 2, dtype=torch.bool), [0], 1)[0, 0])
    ) == pytest.approx(b)


def test_sdp_ledger_records_shuffles_and_each_round_costs_at_most_the_local_epsilon():
    result = run(isrl_digits_spec(algorithm="sdp_mbsgd", rounds=5, eval_every=5))
    eps0 = 1 / result.privacy.noise_multiplier  # σ is read as 1/ε0
    events = {e.event for e in result.ledger.entries}
    assert events == {ShuffleEvent(eps0, 640)}  # 10 silos × 64 records, every message shuffled together
    assert result.epsilon == pytest.approx(3.0, rel=2e-3)
    for accountant in ("rdp", "pld"):
        one_round = Ledger([e for e in result.ledger.entries if e.round == 1])
        assert one_round.epsilon(delta=DELTA, accountant=accountant) <= eps0
    assert shuffle_epsilon(delta=DELTA, local_epsilon=eps0, num_users=640) < eps0 / 2


@pytest.mark.parametrize(("eps0", "n"), [(0.5, 2), (1.0, 25), (4.0, 100), (8.0, 640), (4.0, 10**5)])
def test_shuffle_bound_is_never_above_the_local_epsilon(eps0, n):
    assert shuffle_epsilon(delta=1e-6, local_epsilon=eps0, num_users=n) <= eps0


def test_shuffle_bound_matches_feldman_mcmillan_talwar():
    # github.com/apple/ml-shuffling-amplification README (FMT 2021's code): n = 1e5, ε0 = 4, δ = 1e-6
    # gives ε between 0.1675385583317841 and 0.172790550755978 (see tests/dpfl/privacy/test_shuffle.py).
    eps = shuffle_epsilon(delta=1e-6, local_epsilon=4.0, num_users=10**5)
    assert 0.1675385583317841 - 0.5378040242374512 / 2**10 < eps <= 0.172790550755978


def test_paper_config_is_the_papers_mnist_setting():
    spec = load_spec((Path(__file__).parents[3] / "configs/paper/isrl_mnist.yaml").read_text())
    ds = spec.dataset  # reference/000_isrl_dp.md §6.2
    assert (spec.algorithm, ds.name, ds.silos, ds.partition.kind) == ("isrl_spider", "mnist", 25, "pairs")
    assert (ds.features, spec.model.hidden, spec.rounds, spec.silos_per_round) == ({"pca": 50}, [64], 50, 25)
    assert spec.privacy.delta == pytest.approx(1 / 1238**2, rel=0.02)


_MNIST = {
    "dataset": {"name": "mnist", "silos": 25, "partition": {"kind": "pairs"}, "features": {"pca": 50}},
    "model": {"name": "mlp", "hidden": [64]},
    "eval_every": 20,
    "privacy": {"epsilon": 3.0, "delta": DELTA},
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algorithm", "rounds", "params", "floor"),
    [
        ("isrl_spider", 20, {"lr": 0.5, "batch_size": 128, "phase": 4}, 0.50),  # measured 0.572
        (
            "isrl_proxsgd",
            20,
            {"lr": 0.5, "batch_size": 128, "prox": "l2_ball", "radius": 10.0},
            0.52,
        ),  # 0.594
        ("isrl_localsgd", 20, {"lr": 0.2, "batch_size": 64, "local_steps": 3}, 0.56),  # measured 0.641
        ("sdp_mbsgd", 12, {"lr": 1.0, "batch_size": 256}, 0.50),  # measured 0.579 (ε0 = 4.13)
    ],
)
def test_mnist_accuracy_floor_at_epsilon_3(algorithm, rounds, params, floor):
    spec = parse_spec(_MNIST | {"algorithm": algorithm, "rounds": rounds, "params": params})
    result = run(spec, data_dirs=[data_dir()])
    assert result.epsilon <= 3.0
    assert result.final.accuracy >= floor  # chance is 0.10 (25 silos, digit pairs, PCA 50, MLP 64)

"""Seed 001's second-order family (reference/001_gdp_localnewton.md): GDP-LocalNewton, GDP-GD, LocalNewton."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, jacrev, vmap

from dpfl.algorithms.newton import LINE_SEARCH_CAVEAT
from dpfl.algorithms.newton.mechanism import noise_std, noisy_gradients, noisy_hessians, paper_noise_scales
from dpfl.algorithms.newton.objective import ClientData, client_data, gradients, hessians
from dpfl.algorithms.newton.steps import decayed_step
from dpfl.engine import gaussian_noise
from dpfl.errors import SpecError
from dpfl.privacy.accountants.gdp import gdp_epsilon, gdp_mu
from dpfl.privacy.events import GDPEvent
from dpfl.runner import prepare, project, run
from dpfl.spec import parse_spec
from tests.factories import data_dir

DELTA = 1e-5


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Small batched LAPACK calls: threads buy nothing, and spin-waiting peers on a busy machine
    make eigh 10× slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _spec(**overrides):
    base = {
        "algorithm": "gdp_localnewton",
        "params": {"feature_clip": 3.0, "lr": 0.5},
        "dataset": {"name": "logistic", "silos": 8, "options": {"num_samples": 2_000, "num_test": 1_000}},
        "model": {"name": "logreg"},
        "rounds": 4,
        "privacy": {"mu": 1.0, "delta": DELTA},
        "seed": 3,
    }
    return parse_spec(base | overrides)


def _a9a(algorithm: str, params: dict, privacy: dict | None = None):
    spec = {
        "algorithm": algorithm,
        "params": params,
        "dataset": {"name": "adult", "silos": 50, "options": {"encoding": "a9a"}},
        "model": {"name": "logreg"},
        "rounds": 10,
        "eval_every": 10,
        "seed": 0,
    }
    return parse_spec(spec if privacy is None else spec | {"privacy": privacy})


# --- the batched step against a per-client reference ----------------------------------------------


def _reference_direction(x, y, w, *, ridge, clip, grad_std, hess_std, floor, seed, silo, r):
    """One client's noisy Newton direction from autograd, per-record clipping and single solves."""

    def record_loss(v, xj, yj):
        return F.softplus(-yj * (xj @ v))

    per_record = vmap(grad(record_loss), in_dims=(None, 0, 0))(w, x, y)
    norms = torch.linalg.vector_norm(per_record, dim=1, keepdim=True)
    g = (per_record * torch.clamp(clip / norms, max=1.0)).mean(0) + ridge * w
    h = jacrev(grad(lambda v: F.softplus(-y * (x @ v)).mean() + ridge / 2 * v @ v))(w)  # reverse over reverse
    z = gaussian_noise((len(w),), grad_std, seed=seed, silos=[silo], round=r, stream=16, dtype=w.dtype)[0]
    u = gaussian_noise(
        (len(w), len(w)), hess_std, seed=seed, silos=[silo], round=r, stream=17, dtype=w.dtype
    )[0]
    noisy_h = h + torch.triu(u) + torch.triu(u, 1).T
    lam, vec = torch.linalg.eigh(noisy_h)
    floored = vec @ torch.diag(lam.clamp(min=floor)) @ vec.T
    return torch.linalg.solve(floored, g + z), (lam < floor).double().mean()


def test_batched_newton_step_equals_a_per_client_loop():
    spec = _spec(params={"feature_clip": 3.0, "grad_clip": 0.4, "lr": 0.5, "ridge": 0.01}, participation=5)
    algorithm = prepare(spec)
    algorithm.setup(project(algorithm).noise_multiplier)
    r, clients = 2, np.array([0, 2, 3, 5, 7])
    data = algorithm.clients.take(clients)
    w = torch.randn(len(clients), data.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    move = algorithm.direction(data, w, clients, r, 0)
    assert move.metrics["clip_fraction"] > 0.3  # Γ = 0.4 < R binds on many records
    for row, silo in enumerate(clients):
        n = int(algorithm.data.silo_sizes[silo])
        expected, _ = _reference_direction(
            data.x[row, :n],
            data.y[row, :n],
            w[row],
            ridge=0.01,
            clip=0.4,
            grad_std=float(algorithm.grad_std[silo]),
            hess_std=float(algorithm.hessian_std[silo]),
            floor=0.01,
            seed=spec.seed,
            silo=int(silo),
            r=r,
        )
        torch.testing.assert_close(move.direction[row], expected, rtol=1e-9, atol=1e-9)
    assert 0 < move.metrics["eigen_floored"] < 1


def test_feature_clipping_bounds_every_record_and_keeps_directions():
    algorithm = prepare(_spec(params={"feature_clip": 1.5}))
    algorithm.setup(1.0)
    x, mask = algorithm.clients.x, algorithm.clients.mask.bool()
    norms = torch.linalg.vector_norm(x, dim=-1)[mask]
    assert float(norms.max()) == pytest.approx(1.5, rel=1e-12)
    raw = algorithm.data.x_train[algorithm.data.silos[0][0]].double()
    torch.testing.assert_close(x[0, 0], raw * min(1.0, 1.5 / float(raw.norm())))


# --- noise scales and the ledger ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("algorithm", "local_steps", "releases"),
    [("gdp_localnewton", 1, 2), ("gdp_localnewton", 3, 2), ("gdp_gd", 1, 1)],
)
def test_noise_scales_match_the_papers_formulas(algorithm, local_steps, releases):
    mu, rounds = 5.0, 4
    params = {"feature_clip": 2.0, "grad_clip": 1.5, "local_steps": local_steps}
    algo = prepare(_spec(algorithm=algorithm, params=params, rounds=rounds, privacy={"mu": mu}))
    privacy = project(algo)
    iterations = rounds * local_steps  # T counts local iterations
    assert privacy.noise_multiplier == pytest.approx(math.sqrt(releases * iterations) / mu, rel=1e-12)
    algo.setup(privacy.noise_multiplier)
    sizes = algo.data.silo_sizes
    if algorithm == "gdp_localnewton":
        for k, s in enumerate(sizes):
            # σ_g = 2Γ√(2T)/(μs), σ_H = 2B√(2T)/(μs) with Γ = 1.5, B = R²/4 = 1
            sigma_g, sigma_h = paper_noise_scales(
                mu=mu, iterations=iterations, grad_bound=1.5, hessian_bound=1.0, size=s
            )
            assert algo.grad_std[k] == pytest.approx(
                2 * 1.5 * math.sqrt(2 * iterations) / (mu * s), rel=1e-12
            )
            assert algo.grad_std[k] == pytest.approx(sigma_g, rel=1e-12)
            assert algo.hessian_std[k] == pytest.approx(sigma_h, rel=1e-12)
    else:  # GDP-GD: one release per iteration, σ_g = 2Γ√T/(μs)
        np.testing.assert_allclose(algo.grad_std, 2 * 1.5 * math.sqrt(iterations) / (mu * sizes), rtol=1e-12)


def test_drawn_noise_has_the_calibrated_std_and_a_symmetric_hessian():
    algorithm = prepare(_spec(dataset={"name": "logistic", "silos": 4, "options": {"num_features": 60}}))
    algorithm.setup(project(algorithm).noise_multiplier)
    clients = np.arange(4)
    data = algorithm.clients.take(clients)
    w = torch.zeros(4, 60, dtype=torch.float64)
    std = algorithm.hessian_std[clients]
    exact = hessians(data, w, ridge=0.001)
    noise = noisy_hessians(torch.zeros_like(exact), std, seed=0, clients=clients, round=1, step=0)
    torch.testing.assert_close(
        noisy_hessians(exact, std, seed=0, clients=clients, round=1, step=0), exact + noise
    )
    assert torch.equal(noise, noise.transpose(1, 2))
    upper = noise[:, *torch.triu_indices(60, 60)] / torch.as_tensor(std)[:, None]
    assert float(upper.std()) == pytest.approx(1.0, rel=0.03)  # 4 × 1,830 entries on and above the diagonal
    g = noisy_gradients(
        torch.zeros(4, 60, dtype=torch.float64),
        algorithm.grad_std[clients],
        seed=0,
        clients=clients,
        round=1,
        step=0,
    )
    assert float((g / torch.as_tensor(algorithm.grad_std[clients])[:, None]).std()) == pytest.approx(
        1.0, rel=0.1
    )


def test_ledger_has_one_gdp_event_per_release_and_composes_to_exactly_mu():
    result = run(_spec(params={"feature_clip": 3.0, "lr": 0.5, "local_steps": 2}, rounds=3))
    sigma = result.privacy.noise_multiplier
    assert sigma == pytest.approx(math.sqrt(2 * 3 * 2), rel=1e-12)  # √(2T) with T = R·L = 6, μ = 1
    per_party: dict[str, list] = {}
    for entry in result.ledger.entries:
        per_party.setdefault(entry.party, []).append(entry.event)
    assert len(per_party) == 8
    assert all(
        events == [GDPEvent(1 / sigma, neighbouring="replace_one")] * 12 for events in per_party.values()
    )
    out = result.to_json()["privacy"]
    assert out["neighbouring"] == "replace_one"
    assert out["mu"] == pytest.approx(1.0, rel=1e-12)
    assert out["target_mu"] == 1.0 and out["accountant"] == "gdp"
    assert out["epsilon"] == pytest.approx(4.377, rel=1e-3)  # reference §1.4: μ = 1 ↔ ε ≈ 4.377 at δ = 1e-5
    assert out["guaranteed"] is True and out["warning"] is None
    assert [r.epsilon for r in result.rounds] == pytest.approx(
        [float(gdp_epsilon(math.sqrt(r / 3), delta=DELTA)) for r in (1, 2, 3)], rel=1e-9
    )


def test_epsilon_target_converts_to_mu_with_the_gdp_accountant():
    result = run(_spec(rounds=2, privacy={"epsilon": 2.0, "delta": DELTA, "accountant": "gdp"}))
    assert result.mu == pytest.approx(gdp_mu(epsilon=2.0, delta=DELTA), rel=1e-9)
    assert result.mu == pytest.approx(0.502, abs=1e-3)  # reference §1.4: ε = 2 at δ = 1e-5 is μ ≈ 0.502
    assert result.epsilon == pytest.approx(2.0, rel=1e-9)
    paper = run(
        _spec(rounds=2, privacy={"epsilon": 2.0, "delta": DELTA, "calibration": "paper", "accountant": "gdp"})
    )
    assert paper.privacy.noise_multiplier == pytest.approx(result.privacy.noise_multiplier, rel=1e-12)


def test_line_search_mode_is_flagged_as_not_guaranteed():
    params = {"feature_clip": 3.0, "step": "line_search", "lr": 1.0}
    flagged = run(_spec(params=params, rounds=2)).to_json()["privacy"]
    assert flagged["guaranteed"] is False
    assert flagged["warning"] == LINE_SEARCH_CAVEAT
    assert flagged["warning"].startswith("privacy not guaranteed: line search uses raw data")
    assert flagged["mu"] == pytest.approx(1.0, rel=1e-12)  # the ledger still shows what the noise gives
    decay = run(_spec(params=params | {"step": "decay"}, rounds=2)).to_json()["privacy"]
    assert decay["guaranteed"] is True and decay["warning"] is None
    plain = run(_spec(algorithm="localnewton", params=params, rounds=2, privacy=None)).to_json()["privacy"]
    assert plain["guaranteed"] is None and plain["mu"] is None  # non-private: no claim to flag


def test_decaying_steps_follow_both_readings():
    assert [decayed_step(0.03, rate=0.5, iteration=t, form="geometric") for t in range(4)] == pytest.approx(
        [0.03, 0.015, 0.0075, 0.00375]
    )
    assert [decayed_step(0.03, rate=0.5, iteration=t, form="compounding") for t in range(4)] == pytest.approx(
        [0.03, 0.015, 0.00375, 0.03 / 64]
    )


# --- bad specs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"algorithm": "isrl_mbsgd", "params": {}, "model": {"name": "logreg"}},
            "`privacy.mu` is a μ-GDP target, offered by algorithms of notion `gdp`; give `epsilon` or "
            "`noise_multiplier` for isrl_mbsgd.",
        ),
        (
            {"model": {"name": "mlp"}},
            "`model.name` must be `logreg` for gdp_localnewton; got 'mlp'.",
        ),
        (
            {"dataset": {"name": "digits", "silos": 4}},
            "`dataset.name` must be a dataset with two classes for gdp_localnewton (one of adult, "
            "breast_cancer, creditcard, csv, heart, logistic); 'digits' has 10.",
        ),
        (
            {"algorithm": "gdp_gd", "params": {"step": "line_search"}},
            "`params.step` input should be 'fixed' or 'decay'; got 'line_search'.",
        ),
    ],
)
def test_bad_specs_name_the_field(overrides, message):
    with pytest.raises(SpecError) as info:
        project(prepare(_spec(**overrides)))
    assert str(info.value) == message


def test_mu_target_defaults_to_the_gdp_accountant():
    assert _spec().privacy.accountant == "gdp"
    assert _spec(privacy={"mu": 1.0, "accountant": "rdp"}).privacy.accountant == "rdp"
    assert _spec(privacy={"epsilon": 1.0}).privacy.accountant == "rdp"


# --- accuracy floors on a9a (real data) -----------------------------------------------------------


def test_localnewton_and_gdp_localnewton_at_mu_5_reach_floors_on_a9a():
    dirs = [data_dir()]
    exact = run(_a9a("localnewton", {"feature_clip": 3.75}), data_dirs=dirs)
    assert exact.final.accuracy >= 0.845  # measured 0.8514 (majority class 0.764)
    private = run(
        _a9a("gdp_localnewton", {"feature_clip": 3.75, "lr": 0.1}, {"mu": 5.0, "delta": DELTA}),
        data_dirs=dirs,
    )
    assert private.final.accuracy >= 0.84  # measured 0.8476
    assert private.mu == pytest.approx(5.0, rel=1e-12)
    assert private.epsilon == pytest.approx(33.10, rel=1e-3)  # reference §1.4


@pytest.mark.parametrize("algorithm", ["gdp_localnewton", "gdp_gd"])
def test_the_gradient_noise_covers_replacing_a_record_and_depends_on_the_clients_size(algorithm):
    params = {"feature_clip": 3.0, "lr": 0.5}
    alg = prepare(_spec(algorithm=algorithm, params=params))
    alg.setup(project(alg).noise_multiplier)
    bound, std = alg.params.grad_bound, float(alg.grad_std[0])
    one = client_data(alg.data, radius=3.0).take([0])
    s = int(one.sizes[0])
    # A model far along e1 and two records of norm R with margin −10 (so |ℓ'| ≈ 1) pointing
    # almost opposite ways: replacing one by the other moves the clipped mean by ≈ 2Γ/s.
    w = torch.zeros(1, one.dim, dtype=one.x.dtype)
    w[0, 0] = 1000.0
    tilt = torch.zeros(one.dim, dtype=one.x.dtype)
    tilt[0], tilt[1] = -0.01, math.sqrt(3.0**2 - 0.01**2)

    def mean_gradient(data):
        return gradients(data, w, ridge=alg.params.ridge, clip=bound)[0][0]

    def with_first(x0):
        x, y = one.x.clone(), one.y.clone()
        x[0, 0], y[0, 0] = x0, 1.0
        return ClientData(x, y, one.mask, one.sizes)

    mirrored = tilt.clone()
    mirrored[1] = -tilt[1]
    base = mean_gradient(with_first(tilt))
    replaced = float(torch.linalg.vector_norm(mean_gradient(with_first(mirrored)) - base))
    assert bound == 3.0 and replaced / (2 * bound / s) == pytest.approx(
        1.0, abs=1e-4
    )  # the noise's sensitivity
    assert std == pytest.approx(alg.sigmas[0] * 2 * bound / s, rel=1e-12)
    # Remove record 0: the mean moves by less, but the noise the release would carry is scaled
    # by 1/(s − 1), not 1/s: a different variance, which one Gaussian event does not cover.
    mask = one.mask.clone()
    mask[0, 0] = 0
    removed = float(
        torch.linalg.vector_norm(mean_gradient(ClientData(one.x, one.y, mask, one.sizes - 1)) - base)
    )
    assert removed <= 2 * bound / s
    assert float(noise_std(alg.sigmas[:1], bound=bound, sizes=np.array([s - 1]))[0]) / std == pytest.approx(
        s / (s - 1)
    )
    (event, *_) = {e.event for e in alg.plan(alg.sigmas[0]).entries}
    assert event.neighbouring == "replace_one"

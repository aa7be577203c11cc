"""Cheu et al.'s binomial vector summation (P_vec) and `sdp_mbsgd` with `randomizer: binomial`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dp_accounting.pld import common, privacy_loss_distribution

from dpfl.algorithms.isrl import vector_sum
from dpfl.algorithms.isrl.vector_sum import VectorSumParameters, analyze, randomize, vector_sum_parameters
from dpfl.engine import silo_generator
from dpfl.errors import SpecError, UnsupportedEventError
from dpfl.privacy.events import ApproxDPEvent
from dpfl.runner import prepare, project, run
from tests.factories import isrl_digits_spec

DELTA = 1e-5


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Returns 2 silos × 25 users of vectors in R^8 with ‖x‖₂ ≤ 1, and the mask."""
    x = torch.zeros(2, 25, 8, dtype=torch.float64)
    x[..., 0], x[..., 1] = 0.3, -0.4
    x[0, :, 2] = 0.5  # ‖x‖ = √0.5 in silo 0, 0.5 in silo 1
    x[1, :, 7] = torch.linspace(-0.8, 0.8, 25, dtype=torch.float64)
    x[1] *= 1 / torch.linalg.vector_norm(x[1], dim=-1, keepdim=True).clamp(min=1)
    return x, torch.ones(2, 25, dtype=torch.bool)


def _estimates(params: VectorSumParameters, draws: int) -> torch.Tensor:
    x, mask = _inputs()
    out = []
    for k in range(draws):
        counts = randomize(x, mask, params, [silo_generator(0, s, k, 2) for s in range(2)])
        out.append(analyze(counts.sum((0, 1)), params))
    return torch.stack(out)


def _rounding_variance(params: VectorSumParameters) -> torch.Tensor:
    x, _ = _inputs()
    w = (x + params.bound) / (2 * params.bound) * params.g
    frac = w - torch.floor(w)
    return (frac * (1 - frac)).sum((0, 1))


def test_parameters_follow_the_theorem():
    # g = ⌈max(2√n, √d, 4)⌉, b = ⌈24·10⁴ g² ln²(4d/δ) / (ε² n)⌉, p = 1/4
    p = vector_sum_parameters(epsilon=10.0, delta=2.5e-6, num_users=640, dim=4810, bound=1.0)
    assert (p.g, p.b, p.p) == (70, 9_521_892, 0.25)
    p = vector_sum_parameters(epsilon=1.0, delta=1e-6, num_users=10_000, dim=10, bound=2.0)
    assert (p.g, p.b) == (200, 294_147_523)
    assert vector_sum_parameters(epsilon=15.0, delta=0.1, num_users=1, dim=1, bound=1.0).g == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"epsilon": 15.5, "delta": 1e-6},
            "`privacy` asks the binomial vector sum for ε′ = 15.5 in one round",
        ),
        (
            {"epsilon": 1.0, "delta": 0.5},
            "`privacy.delta` gives a per-round δ′ = 0.5; the theorem needs 0 < δ′ < 1/2.",
        ),
    ],
)
def test_the_theorems_range_is_enforced(kwargs, message):
    with pytest.raises(SpecError) as info:
        vector_sum_parameters(num_users=10, dim=3, bound=1.0, **kwargs)
    assert str(info.value).startswith(message)


def test_analyzer_is_unbiased_with_the_theorems_variance():
    params = vector_sum_parameters(epsilon=4.0, delta=1e-6, num_users=50, dim=8, bound=1.0)
    est = _estimates(params, 400)
    truth = _inputs()[0].sum((0, 1))
    predicted = torch.as_tensor(params.coordinate_variance(_rounding_variance(params)))
    standard_error = torch.sqrt(predicted / len(est))
    assert torch.all((est.mean(0) - truth).abs() <= 4 * standard_error)
    ratio = est.var(0) / predicted  # 399 degrees of freedom: relative sd of a variance ≈ 7%
    assert torch.all((ratio > 0.75) & (ratio < 1.25))
    # The theorem's noise dominates: sd of the mean ≈ 424·L·ln(4d/δ)/(ε n) per coordinate.
    sd_of_mean = math.sqrt(float(predicted[3])) / 50
    assert sd_of_mean == pytest.approx(424 * math.log(4 * 8 / 1e-6) / (4.0 * 50), rel=0.01)


def test_debiasing_is_exact_when_few_noise_bits_leave_little_variance():
    params = VectorSumParameters(g=15, b=6, p=0.25, num_users=50, bound=1.0)
    est = _estimates(params, 2000)
    truth = _inputs()[0].sum((0, 1))
    standard_error = torch.sqrt(
        torch.as_tensor(params.coordinate_variance(_rounding_variance(params))) / 2000
    )
    assert float(standard_error.max()) < 0.12
    assert torch.all((est.mean(0) - truth).abs() <= 4 * standard_error)


def test_messages_are_integer_counts_in_range_and_padding_sends_nothing():
    x, mask = _inputs()
    mask[1, 20:] = False
    params = vector_sum_parameters(epsilon=2.0, delta=1e-6, num_users=45, dim=8, bound=1.0)
    counts = randomize(x, mask, params, [silo_generator(0, s, 1, 2) for s in range(2)])
    real = counts[mask]
    assert torch.equal(real, torch.round(real))
    assert float(real.min()) >= 0 and float(real.max()) <= params.g + params.b
    assert torch.all(counts[1, 20:] == 0)
    # Without noise bits a count is x̄_j ∈ {⌊w_j g⌋, ⌈w_j g⌉} ⊂ {0, …, g}.
    bare = VectorSumParameters(g=params.g, b=0, p=0.25, num_users=45, bound=1.0)
    rounded = randomize(x, mask, bare, [silo_generator(0, s, 1, 2) for s in range(2)])[mask]
    w = ((x + 1) / 2 * params.g)[mask]
    assert torch.all((rounded == torch.floor(w)) | (rounded == torch.ceil(w)))
    assert float(rounded.min()) >= 0 and float(rounded.max()) <= params.g


def _binomial_spec(**privacy):
    """Returns `sdp_mbsgd` with the binomial randomizer on digits: 5 silos of 32 messages, 2 rounds."""
    return isrl_digits_spec(
        algorithm="sdp_mbsgd",
        dataset={"name": "digits", "silos": 5},
        rounds=2,
        eval_every=2,
        params={"lr": 0.5, "batch_size": 32, "clip": 1.0, "randomizer": "binomial"},
        privacy={"epsilon": 12.0, "delta": DELTA, "accountant": "pld"} | privacy,
    )


def test_ledger_records_the_theorems_round_guarantee_and_pld_composes_it():
    result = run(_binomial_spec())
    sigma = result.privacy.noise_multiplier
    round_eps, round_delta = 1 / sigma, DELTA / (2 * 2)  # σ = 1/ε′, δ′ = δ/(2R)
    assert {e.event for e in result.ledger.entries} == {ApproxDPEvent(round_eps, round_delta)}
    assert len(result.ledger.entries) == 5 * 2  # every silo takes part in both rounds
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(round_eps, round_delta)
    ).self_compose(2)
    assert result.epsilon == pytest.approx(pld.get_epsilon_for_delta(DELTA), rel=1e-9)
    assert result.epsilon == pytest.approx(12.0, rel=1e-3)
    final = result.final.metrics
    assert final["round_epsilon"] == pytest.approx(round_eps)
    expected = vector_sum_parameters(epsilon=round_eps, delta=round_delta, num_users=160, dim=4810, bound=1.0)
    assert final["noise_bits"] == expected.b
    with pytest.raises(UnsupportedEventError, match="accountant 'rdp' cannot account ApproxDPEvent"):
        result.ledger.epsilon(delta=DELTA, accountant="rdp")


def test_binomial_needs_an_accountant_that_composes_epsilon_delta_pairs():
    with pytest.raises(SpecError) as info:
        prepare(_binomial_spec(accountant="rdp"))
    assert str(info.value) == (
        "`privacy.accountant` must be one of pld for `params.randomizer: binomial` (Cheu et al.'s "
        "theorem gives each round an (ε, δ) pair, which only these compose); got 'rdp'."
    )


def test_a_noise_multiplier_beyond_the_theorem_is_refused_and_calibration_stops_at_it():
    with pytest.raises(SpecError, match=r"`privacy.noise_multiplier` must be ≥ 0.06667 .* got 0.05"):
        run(_binomial_spec(epsilon=None, noise_multiplier=0.05))
    # A target that would need ε′ > 15 per round gets the smallest σ the theorem covers.
    privacy = project(prepare(_binomial_spec(epsilon=40.0)))
    assert 1.0 <= privacy.noise_multiplier * vector_sum.MAX_EPSILON <= 1 + 1e-4
    assert privacy.planned_epsilon[-1] < 40.0


def test_a_silos_messages_do_not_depend_on_the_other_silos():
    algorithm = prepare(_binomial_spec())
    algorithm.setup(0.2)
    grads = torch.randn(3, 32, algorithm.layout.size, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 32, dtype=torch.bool)
    first, params = algorithm.binomial_messages(grads, mask, np.array([0, 2, 4]), 1)
    others = grads.clone()
    others[[0, 2]] = torch.randn(2, 32, algorithm.layout.size, generator=torch.Generator().manual_seed(1))
    moved = [1, 0, 2]  # silo 2 listed first, the other silos' gradients changed
    second, _ = algorithm.binomial_messages(others[moved], mask, np.array([2, 0, 4]), 1)
    assert params.num_users == 96
    assert torch.equal(first[1], second[0])
    assert not torch.equal(first[0], second[1])

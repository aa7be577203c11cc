"""ULDP-NAIVE: the user-level sensitivity of the clipped silo sum is 2|S|C, and the ledger says so."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch

from dpfl.algorithms.uldp.naive import ULDPNaive
from dpfl.data import Partition, UserAllocation, load_dataset
from dpfl.federation import FederatedData
from dpfl.models import build_model
from dpfl.runner import prepare, project, run
from dpfl.spec import parse_spec
from tests.dpfl.algorithms.test_uldp_family import HEART_PARAMS, heart_spec
from tests.factories import data_dir

CLIP = 0.1
SIGMA = 1.0


def _constructed(with_user: bool) -> FederatedData:
    """Digits in 2 silos: user 0 holds 70 records of class 1 in each; users 1 and 2 hold 5 of class 5.

    Its neighbour without user 0 keeps both silos, each training on its 5 other records, so
    each clipped delta turns from ~class 1 to ~class 5 (reference §2.2 assumes it vanishes).
    """
    ds = load_dataset("digits")
    ones, fives = np.flatnonzero(ds.y_train == 1), np.flatnonzero(ds.y_train == 5)
    silos, owners = [], []
    for s in range(2):
        user = ones[70 * s : 70 * s + 70] if with_user else np.zeros(0, np.int64)
        rows = np.concatenate([user, fives[5 * s : 5 * s + 5]])
        ids = np.concatenate([np.zeros(len(user), np.int64), np.full(5, 1 + s, np.int64)])
        order = np.argsort(rows)
        silos.append(rows[order])
        owners.append(ids[order])
    split = Partition(silos, ds.y_train, ds.num_classes, "constructed")
    return FederatedData.build(ds, split, image=False, users=UserAllocation(owners, 3, "constructed"))


def _released_sum(with_user: bool) -> tuple[torch.Tensor, float]:
    """Returns Σ_s of the silos' round-1 releases (read off the model step) and the per-silo noise std."""
    # One full-batch local step: the delta's direction is the class-mean gradient's.
    params = {"global_lr": 1, "clip": CLIP, "local_lr": 0.1, "local_epochs": 1, "batch_size": 75}
    spec = parse_spec(
        {
            "algorithm": "uldp_naive",
            "params": params,
            "dataset": {"name": "digits", "silos": 2},
            "model": {"name": "logreg"},
            "rounds": 1,
            "privacy": {"noise_multiplier": SIGMA, "delta": 1e-5},
        }
    )
    data = _constructed(with_user)
    model = build_model("logreg", input_shape=data.input_shape, num_classes=data.num_classes, seed=0)
    alg = ULDPNaive(spec, data, model)
    alg.setup(SIGMA)
    w0 = alg.w.clone()
    out = alg.round(1)
    return 2 * (alg.w - w0), out.metrics["silo_noise_std"]  # w += η_g · mean of 2 releases


def test_removing_a_user_moves_the_silo_sum_by_more_than_s_c_and_the_noise_covers_2_s_c():
    with_user, std = _released_sum(True)
    without, _ = _released_sum(False)
    # The noise is drawn from (seed, silo, round) only, so it cancels: this is Σ_s clip(Δ_s) moved.
    moved = float(torch.linalg.vector_norm(with_user - without))
    silos = 2
    assert moved / (silos * CLIP) == pytest.approx(1.517, abs=0.01)  # the paper's |S|C is exceeded
    assert moved / (2 * silos * CLIP) <= 1.0
    # Per-silo std σ·2C·√|S|: the sum's std σ·2|S|C is ≥ σ times what this user moved it by.
    assert std == pytest.approx(SIGMA * 2 * CLIP * math.sqrt(silos))
    assert std * math.sqrt(silos) / moved >= SIGMA


def _dp_accounting_epsilon(sigma: float, rounds: int) -> float:
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), rounds))
    return acc.get_epsilon(1e-5)


def _naive(**overrides) -> dict:
    return heart_spec("uldp_naive", params=dict(HEART_PARAMS, global_lr=1), **overrides)


def test_the_papers_sigma_5_spends_16_5_not_7_08_over_50_rounds():
    stated = _dp_accounting_epsilon(5.0, 50)  # Thm 3 for σ = 5, T = 50 (reference §3.4: 7.077)
    assert stated == pytest.approx(7.077, abs=1e-3)
    # σ = 5 against the true sensitivity: the ledger gives the paper's number, for twice its noise.
    ours = project(prepare(parse_spec(_naive(rounds=50)), data_dirs=[data_dir()]))
    assert ours.planned_epsilon[-1] == pytest.approx(stated, rel=1e-9)
    # The paper's noise for its ε: σ_paper = 5, which is 2.5 in units of 2|S|C.
    spec = _naive(rounds=50, privacy={"epsilon": stated, "delta": 1e-5, "calibration": "paper"})
    paper = project(prepare(parse_spec(spec), data_dirs=[data_dir()]))
    assert paper.noise_multiplier == pytest.approx(2.5, rel=2e-4)
    spent = _dp_accounting_epsilon(paper.noise_multiplier, 50)
    assert spent == pytest.approx(16.51, abs=0.01)
    assert paper.planned_epsilon[-1] == pytest.approx(spent, rel=1e-9)
    assert "the paper calibration under-protects: the ledger gives ε = 16.5" in paper.warning(spent)


def test_a_paper_calibrated_run_records_half_the_papers_sigma():
    params = dict(HEART_PARAMS, global_lr=1, local_epochs=1)
    spec = heart_spec(
        "uldp_naive",
        params=params,
        rounds=3,
        eval_every=3,
        privacy={"epsilon": 2.0, "delta": 1e-5, "calibration": "paper"},
    )
    result = run(parse_spec(spec), data_dirs=[data_dir()])
    sigma = result.privacy.noise_multiplier
    assert [e.event.noise_multiplier for e in result.ledger.entries] == [sigma] * 3
    sigma_paper = 2 * sigma  # the paper's own std σ_paper·C·√|S| (C = 0.1, |S| = 4)
    assert result.final.metrics["silo_noise_std"] == pytest.approx(sigma_paper * 0.1 * 2)
    out = result.to_json()["privacy"]
    assert out["epsilon"] == pytest.approx(_dp_accounting_epsilon(sigma, 3), rel=1e-9)
    assert out["epsilon"] > 2.0
    assert "under-protects" in out["warning"]

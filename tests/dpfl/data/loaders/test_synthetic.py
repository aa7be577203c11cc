"""FedProx Synthetic(α, β) and the logistic-model generator."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dpfl.data import load_dataset, partition
from dpfl.errors import SpecError


def test_synthetic_shape_and_silos() -> None:
    data = load_dataset("synthetic", alpha=1.0, beta=1.0, num_silos=30, seed=0)
    assert (data.num_features, data.num_classes, data.num_silos) == (60, 10, 30)
    train_sizes = np.bincount(data.silo_train, minlength=30)
    sizes = train_sizes + np.bincount(data.silo_test, minlength=30)
    assert sizes.min() >= 50  # floor(LogNormal(4, 2)) + 50
    # Each silo keeps its first int(0.9 n_k) rows for training, as FedProx's script does.
    np.testing.assert_array_equal(train_sizes, (0.9 * sizes).astype(int))
    assert partition(data, kind="natural", num_silos=30, seed=0).sizes.tolist() == train_sizes.tolist()


def test_synthetic_heterogeneity_grows_with_beta() -> None:
    def spread(beta: float) -> float:
        data = load_dataset("synthetic", alpha=0.0, beta=beta, num_silos=30, seed=1)
        means = np.stack([data.x_train[data.silo_train == k].mean(axis=0) for k in range(30)])
        return float(means.mean(axis=1).std())  # spread of B_k across silos

    # v_k ~ N(B_k, 1) with B_k ~ N(0, β²): the per-silo average input spreads like β.
    assert spread(0.0) < 0.4 < 2.0 < spread(5.0)


def test_synthetic_seed_changes_the_data() -> None:
    first = load_dataset("synthetic", seed=0)
    again = load_dataset("synthetic", seed=0)
    other = load_dataset("synthetic", seed=1)
    np.testing.assert_array_equal(first.x_train, again.x_train)
    assert first.num_train != other.num_train or not np.array_equal(first.x_train, other.x_train)


def test_synthetic_refuses_negative_alpha() -> None:
    with pytest.raises(SpecError, match=r"`dataset.alpha` must be a number >= 0; got -1."):
        load_dataset("synthetic", alpha=-1)


def test_logistic_follows_the_paper_sizes() -> None:
    data = load_dataset("logistic")
    assert data.x_train.shape == (50000, 10) and data.x_test.shape == (10000, 10)
    # E[y] = E[sigmoid(w*.x)] = 1/2 by symmetry of x ~ N(0, I).
    assert float(data.y_train.mean()) == pytest.approx(0.5, abs=0.01)


def test_logistic_labels_follow_the_model() -> None:
    data = load_dataset("logistic", num_samples=20000, num_features=5, true_weights="normal", seed=3)
    # The least-squares fit of 2y - 1 on x points along w*, so it separates the classes.
    w, *_ = np.linalg.lstsq(data.x_train, 2.0 * data.y_train - 1.0, rcond=None)
    accuracy = float(((data.x_test @ w > 0) == (data.y_test == 1)).mean())
    assert accuracy > 0.7


def test_logistic_refuses_unknown_weights() -> None:
    expected = "`dataset.true_weights` must be 'uniform' or 'normal'; got 'zero'."
    with pytest.raises(SpecError, match=re.escape(expected)):
        load_dataset("logistic", true_weights="zero")

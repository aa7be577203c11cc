"""PCA fitted on the training set, label binarisation and the features mapping."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dpfl.data import Dataset, apply_features, binary_labels, load_dataset, pca
from dpfl.data.transforms import pca_components
from dpfl.errors import SpecError, UnknownNameError


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_dataset("digits")


def test_pca_matches_scikit_learn_up_to_sign(digits: Dataset) -> None:
    from sklearn.decomposition import PCA

    reduced = pca(digits, 10)
    assert reduced.x_train.shape == (1438, 10) and reduced.x_test.shape == (359, 10)
    assert reduced.feature_names[:2] == ("pc1", "pc2")
    reference = PCA(n_components=10, svd_solver="full").fit(digits.x_train.astype(np.float64))
    np.testing.assert_allclose(np.abs(reduced.x_test), np.abs(reference.transform(digits.x_test)), atol=1e-3)
    _, _, variances = pca_components(digits.x_train, 10)
    np.testing.assert_allclose(variances, reference.explained_variance_, rtol=1e-4)


def test_pca_is_centred_on_training_rows_and_ordered(digits: Dataset) -> None:
    reduced = pca(digits, 20)
    np.testing.assert_allclose(reduced.x_train.mean(axis=0), 0.0, atol=1e-5)
    variances = reduced.x_train.var(axis=0)
    assert np.all(np.diff(variances) <= 1e-6)
    assert reduced.y_train is digits.y_train


def test_pca_sign_convention(digits: Dataset) -> None:
    _, components, _ = pca_components(digits.x_train, 8)
    np.testing.assert_allclose(components @ components.T, np.eye(8), atol=1e-8)
    peaks = components[np.arange(8), np.abs(components).argmax(axis=1)]
    assert np.all(peaks > 0)


def test_pca_refuses_too_many_components(digits: Dataset) -> None:
    with pytest.raises(SpecError) as caught:
        pca(digits, 65)
    assert str(caught.value) == (
        "`dataset.features.pca` must be an integer in [1, 64] (at most the number of "
        "training rows and of features of 'digits'); got 65."
    )


def test_apply_features_runs_pca_and_refuses_unknown_names(digits: Dataset) -> None:
    assert apply_features(digits, {"pca": 5}).num_features == 5
    with pytest.raises(UnknownNameError, match="unknown feature transform 'ica'; registered: pca"):
        apply_features(digits, {"ica": 5})


def test_even_versus_odd_mnist(mnist: Dataset) -> None:
    parity = binary_labels(mnist, positive=(0, 2, 4, 6, 8))
    assert parity.num_classes == 2
    assert int(parity.y_train.sum()) == 5923 + 5958 + 5842 + 5918 + 5851
    with pytest.raises(SpecError, match=re.escape("`dataset.labels.positive` must name some but not all")):
        binary_labels(mnist, positive=range(10))

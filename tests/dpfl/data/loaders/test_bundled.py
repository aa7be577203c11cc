"""Digits and breast cancer, bundled with scikit-learn."""

from __future__ import annotations

import numpy as np

from dpfl.data import load_dataset


def test_digits_split_and_scale() -> None:
    digits = load_dataset("digits")
    assert digits.x_train.shape == (1438, 64) and digits.x_test.shape == (359, 64)
    assert digits.x_train.min() == 0.0 and digits.x_train.max() == 1.0  # 0..16 divided by 16
    # Stratified: each digit sends round(0.2 * n_c) of its rows to the test set.
    assert np.bincount(digits.y_test).tolist() == [36, 36, 35, 37, 36, 36, 36, 36, 35, 36]


def test_breast_cancer_split_and_standardisation() -> None:
    cancer = load_dataset("breast_cancer")
    assert cancer.x_train.shape == (456, 30) and cancer.x_test.shape == (113, 30)
    # 212 malignant (0) and 357 benign (1), split 80/20 within each class.
    assert np.bincount(cancer.y_train).tolist() == [170, 286]
    assert np.bincount(cancer.y_test).tolist() == [42, 71]
    np.testing.assert_allclose(cancer.x_train.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(cancer.x_train.std(axis=0), 1.0, atol=1e-5)
    assert abs(float(cancer.x_test.mean())) < 0.2  # test rows use training statistics

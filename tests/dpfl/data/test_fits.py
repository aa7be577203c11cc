"""The fits that ship with the package (dpfl.data.fits): MNIST's PCA, refitted on the files here,
and a run's data prepared from it without fitting, to the same features bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfl.data import Dataset, transforms
from dpfl.data.fits import SHIPPED_PCA, shipped_fits
from dpfl.data.prepared import clear_prepared, load_prepared
from dpfl.data.transforms import PcaFit, pca, pca_components


@pytest.fixture
def fits_counted(monkeypatch) -> list[int]:
    """Counts the PCA fits on rows (calls of `pca_components`), each still computed."""
    calls: list[int] = []
    real = transforms.pca_components

    def counted(x_train: np.ndarray, num_components: int):
        calls.append(num_components)
        return real(x_train, num_components)

    monkeypatch.setattr(transforms, "pca_components", counted)
    return calls


def test_the_shipped_mnist_pca_is_the_fit_of_its_training_rows(mnist: Dataset) -> None:
    fit = shipped_fits("mnist", {})["pca"]
    mean, components, variances = pca_components(mnist.x_train, SHIPPED_PCA)
    assert fit.components.shape == (SHIPPED_PCA, 784) and fit.mean.shape == (784,)
    assert fit.components.dtype == fit.mean.dtype == np.float32
    # float32 rounding of float64 values from a Gram matrix accumulated in float32 blocks; the
    # 64th variance is 2.6e-3 against 0.05 for the 10th, far from any tie that could swap components
    np.testing.assert_allclose(fit.mean, mean, rtol=0, atol=1e-7)
    np.testing.assert_allclose(fit.components, components, rtol=0, atol=1e-5)
    assert variances[-1] > 2e-3


def test_a_shipped_fit_gives_the_fitted_features_without_fitting(
    mnist: Dataset, fits_counted: list[int]
) -> None:
    fitted = pca(mnist, 50)
    assert fits_counted == [50]
    shipped = pca(mnist, 50, fit=shipped_fits("mnist", {})["pca"])
    assert fits_counted == [50]  # no second fit
    np.testing.assert_array_equal(shipped.x_train, fitted.x_train)
    np.testing.assert_array_equal(shipped.x_test, fitted.x_test)
    assert shipped.fitted == fitted.fitted == ("PCA to 50 components fitted on the training rows",)
    assert shipped.feature_names == fitted.feature_names


def test_prepared_mnist_pca_fits_nothing(data_dir: Path, fits_counted: list[int]) -> None:
    clear_prepared()
    try:
        dataset = load_prepared("mnist", options={}, features={"pca": 50}, search_dirs=[data_dir])
    finally:
        clear_prepared()
    assert fits_counted == []
    assert dataset.x_train.shape == (60_000, 50)
    # the variance along MNIST's first principal component (pixels in [0, 1]), as fitted on the rows
    assert dataset.x_train[:, 0].var() == pytest.approx(5.1167, rel=1e-3)


def test_more_components_than_shipped_are_fitted(mnist: Dataset, fits_counted: list[int]) -> None:
    small = PcaFit(mean=np.zeros(784, np.float32), components=np.eye(784, dtype=np.float32)[:3])
    out = pca(mnist, 4, fit=small)
    assert fits_counted == [4]
    assert out.num_features == 4


def test_no_fit_ships_for_a_dataset_with_options_or_without_fixed_files() -> None:
    assert shipped_fits("mnist", {"subset": 10}) == {}
    assert shipped_fits("heart", {}) == {}

"""MNIST parsed from the official IDX files (shared/data/README.md gives the reference counts)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import Dataset
from dpfl.data.loaders.mnist import read_idx
from dpfl.errors import DatasetUnavailable


def test_shapes_and_dtypes(mnist: Dataset) -> None:
    assert mnist.x_train.shape == (60000, 784) and mnist.x_test.shape == (10000, 784)
    assert mnist.x_train.dtype == np.float32 and mnist.y_train.dtype == np.int64
    assert mnist.num_classes == 10 and mnist.num_features == 784


def test_label_counts_match_the_readme(mnist: Dataset) -> None:
    # shared/data/README.md, "Label counts"
    assert np.bincount(mnist.y_train).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(mnist.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_pixels_are_scaled_to_unit_interval(mnist: Dataset) -> None:
    assert mnist.x_train.min() == 0.0 and mnist.x_train.max() == 1.0
    assert mnist.x_test.min() == 0.0 and mnist.x_test.max() == 1.0
    # 255 grey levels: every pixel is k/255.
    levels = np.unique(mnist.x_train[:100])
    np.testing.assert_allclose(levels * 255, np.round(levels * 255), atol=1e-4)
    assert float(mnist.x_train.mean()) == pytest.approx(0.1307, abs=1e-4)  # the usual MNIST mean


def test_rows_keep_the_official_order(mnist: Dataset) -> None:
    assert mnist.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert mnist.y_test[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]


def test_wrong_magic_number_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(bytes([0, 0, 8, 3, 0, 0, 0, 1]) + bytes(1))
    with pytest.raises(DatasetUnavailable, match="magic 0x00000803, expected 0x00000801"):
        read_idx(path, magic=0x00000801)


def test_truncated_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(bytes([0, 0, 8, 1, 0, 0, 0, 5]) + bytes(3))
    with pytest.raises(DatasetUnavailable, match=r"holds 3 data bytes but its header declares shape \(5,\)"):
        read_idx(path, magic=0x00000801)

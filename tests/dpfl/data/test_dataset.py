"""The Dataset container refuses inconsistent arrays."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.data import Dataset


def _arrays(rows: int = 4) -> dict:
    return {
        "x_train": np.zeros((rows, 3), dtype=np.float32),
        "y_train": np.array([0, 1, 0, 1][:rows], dtype=np.int64),
        "x_test": np.zeros((2, 3), dtype=np.float32),
        "y_test": np.array([1, 0], dtype=np.int64),
        "num_classes": 2,
        "name": "toy",
    }


def test_properties_report_sizes() -> None:
    data = Dataset(**_arrays(), silo_train=np.array([0, 0, 1, 1]), silo_names=("a", "b"))
    assert (data.num_features, data.num_train, data.num_test, data.num_silos) == (3, 4, 2, 2)


def test_float64_features_are_refused() -> None:
    with pytest.raises(ValueError, match="x_train must be a 2-D float32 numpy array"):
        Dataset(**{**_arrays(), "x_train": np.zeros((4, 3))})


def test_label_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match=r"y_test must be >= 0 and < 2; got values in \[0, 2\]"):
        Dataset(**{**_arrays(), "y_test": np.array([2, 0], dtype=np.int64)})


def test_silos_need_names() -> None:
    with pytest.raises(ValueError, match="silo_train and silo_names must be given together"):
        Dataset(**_arrays(), silo_train=np.array([0, 0, 1, 1]))


def test_feature_names_must_match_columns() -> None:
    with pytest.raises(ValueError, match="feature_names has 2 names for 3 features"):
        Dataset(**_arrays(), feature_names=("a", "b"))

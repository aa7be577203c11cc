"""UCI Adult in both encodings; the a9a encoding against LIBSVM's a9a rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import Dataset, load_dataset
from dpfl.errors import SpecError

# LIBSVM a9a / a9a.t: the first rows as published (feature indices from 1).
A9A_FIRST_ROWS = [
    (0, [3, 11, 14, 19, 39, 42, 55, 64, 67, 73, 75, 76, 80, 83]),
    (0, [5, 7, 14, 19, 39, 40, 51, 63, 67, 73, 74, 76, 78, 83]),
    (0, [3, 6, 17, 22, 36, 41, 53, 64, 67, 73, 74, 76, 80, 83]),
]
A9A_T_FIRST_ROWS = [
    (0, [1, 6, 17, 21, 35, 42, 54, 62, 71, 73, 74, 76, 80, 83]),
    (0, [3, 6, 14, 22, 36, 40, 56, 63, 67, 73, 74, 76, 82, 83]),
    (1, [2, 10, 18, 24, 38, 40, 59, 63, 67, 73, 74, 76, 80, 83]),
]


def test_official_row_counts_and_labels(adult_onehot: Dataset) -> None:
    # shared/data/README.md: 32,561 train (7,841 > 50K), 16,281 test (3,846 > 50K).
    assert (adult_onehot.num_train, adult_onehot.num_test) == (32561, 16281)
    assert int(adult_onehot.y_train.sum()) == 7841 and int(adult_onehot.y_test.sum()) == 3846


def test_onehot_has_108_columns(adult_onehot: Dataset) -> None:
    # 6 standardised numerics + 102 indicators (99 categories + "?" in 3 columns).
    assert adult_onehot.num_features == 108
    names = adult_onehot.feature_names
    assert names[:6] == ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
    assert {"workclass=?", "occupation=?", "native-country=?"} <= set(names)
    numeric = adult_onehot.x_train[:, :6].astype(np.float64)
    np.testing.assert_allclose(numeric.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(numeric.std(axis=0), 1.0, atol=1e-5)
    # Every categorical column contributes exactly one indicator per row.
    assert np.all(adult_onehot.x_train[:, 6:].sum(axis=1) == 8)
    assert np.all(adult_onehot.x_test[:, 6:].sum(axis=1) == 8)


def test_a9a_has_123_binary_columns(adult_a9a: Dataset) -> None:
    assert adult_a9a.num_features == 123
    assert (adult_a9a.num_train, adult_a9a.num_test) == (32561, 16281)
    assert set(np.unique(adult_a9a.x_train).tolist()) == {0.0, 1.0}


def test_a9a_rows_without_missing_values_have_14_ones(adult_a9a: Dataset) -> None:
    # adult.names: 30,162 train and 15,060 test rows have no "?"; a "?" sets no indicator.
    ones_train = (adult_a9a.x_train != 0).sum(axis=1)
    ones_test = (adult_a9a.x_test != 0).sum(axis=1)
    assert np.bincount(ones_train, minlength=15)[11:].tolist() == [27, 1809, 563, 30162]
    assert np.bincount(ones_test, minlength=15)[11:].tolist() == [19, 944, 258, 15060]


def test_a9a_first_rows_equal_libsvm(adult_a9a: Dataset) -> None:
    for row, (label, indices) in enumerate(A9A_FIRST_ROWS):
        assert adult_a9a.y_train[row] == label
        assert (np.flatnonzero(adult_a9a.x_train[row]) + 1).tolist() == indices
    for row, (label, indices) in enumerate(A9A_T_FIRST_ROWS):
        assert adult_a9a.y_test[row] == label
        assert (np.flatnonzero(adult_a9a.x_test[row]) + 1).tolist() == indices


def test_a9a_test_set_never_uses_holand_netherlands(adult_a9a: Dataset) -> None:
    # Why LIBSVM lists 122 features for a9a.t: index 123 never occurs in the test rows.
    unused = np.flatnonzero(adult_a9a.x_test.sum(axis=0) == 0)
    assert unused.tolist() == [122]
    assert adult_a9a.feature_names[122] == "native-country=Holand-Netherlands"


def test_unknown_encoding_is_refused(data_dir: Path) -> None:
    expected = "`dataset.encoding` must be one of onehot, a9a; got 'ordinal'."
    with pytest.raises(SpecError, match=re.escape(expected)):
        load_dataset("adult", search_dirs=[data_dir], encoding="ordinal")

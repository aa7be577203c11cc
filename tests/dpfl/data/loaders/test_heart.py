"""Fed-Heart-Disease: FLamby's preprocessing of the four UCI hospitals."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import Dataset, load_dataset, partition
from dpfl.errors import SpecError

# Rows kept after dropping slope/ca/thal and incomplete rows, split 66/34 as FLamby does.
# The train sizes are the ones ULDP-FL reports (reference/004_uldp_fl.md §4.2).
TRAIN_ROWS = [199, 172, 30, 85]
TEST_ROWS = [104, 89, 16, 45]
TRAIN_POSITIVE = [91, 65, 30, 66]
TEST_POSITIVE = [48, 33, 15, 35]


def test_hospital_row_counts(heart: Dataset) -> None:
    assert heart.silo_names == ("cleveland", "hungarian", "switzerland", "va")
    assert np.bincount(heart.silo_train).tolist() == TRAIN_ROWS
    assert np.bincount(heart.silo_test).tolist() == TEST_ROWS
    assert heart.num_train + heart.num_test == 740


def test_positive_counts_per_hospital(heart: Dataset) -> None:
    assert np.bincount(heart.silo_train, weights=heart.y_train).astype(int).tolist() == TRAIN_POSITIVE
    assert np.bincount(heart.silo_test, weights=heart.y_test).astype(int).tolist() == TEST_POSITIVE
    # Cleveland's README counts: 303 rows, num > 0 for 55 + 36 + 35 + 13 = 139 of them.
    assert TRAIN_POSITIVE[0] + TEST_POSITIVE[0] == 139


def test_thirteen_flamby_features(heart: Dataset) -> None:
    assert heart.num_features == 13
    assert heart.feature_names == (
        "age",
        "sex",
        "trestbps",
        "chol",
        "fbs",
        "thalach",
        "exang",
        "oldpeak",
        "cp_2",
        "cp_3",
        "cp_4",
        "restecg_1",
        "restecg_2",
    )


def test_each_hospital_is_standardised_with_its_own_training_rows(heart: Dataset) -> None:
    for silo in range(4):
        rows = heart.x_train[heart.silo_train == silo]
        np.testing.assert_allclose(rows.mean(axis=0), 0.0, atol=1e-5)
        std = rows.std(axis=0, ddof=1)
        constant = np.isclose(std, 0.0)
        np.testing.assert_allclose(std[~constant], 1.0, atol=1e-5)
    # Switzerland's cholesterol is recorded as 0 throughout: it stays 0, not NaN.
    switzerland = heart.x_train[heart.silo_train == 2]
    assert np.all(switzerland[:, heart.feature_names.index("chol")] == 0.0)


def test_pooled_standardisation_uses_all_training_rows(data_dir: Path) -> None:
    pooled = load_dataset("heart", search_dirs=[data_dir], standardise="pooled")
    np.testing.assert_allclose(pooled.x_train.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(pooled.x_train.std(axis=0, ddof=1), 1.0, atol=1e-5)


def test_natural_partition_gives_the_four_hospitals(heart: Dataset) -> None:
    silos = partition(heart, kind="natural", num_silos=4, seed=0)
    assert silos.sizes.tolist() == TRAIN_ROWS
    for silo, rows in enumerate(silos.silo_indices):
        np.testing.assert_array_equal(rows, np.flatnonzero(heart.silo_train == silo))
    assert silos.label_histogram()[:, 1].tolist() == TRAIN_POSITIVE


def test_unknown_standardisation_is_refused(data_dir: Path) -> None:
    expected = "`dataset.standardise` must be 'per_silo', 'pooled' or 'none'; got 'global'."
    with pytest.raises(SpecError, match=re.escape(expected)):
        load_dataset("heart", search_dirs=[data_dir], standardise="global")

"""Seeded stratified splits, standardisation and one-hot codes shared by the loaders."""

from __future__ import annotations

import numpy as np

from dpfl.data.preprocessing import one_hot, standardise, stratified_split


def test_stratified_split_keeps_class_proportions() -> None:
    labels = np.repeat(np.arange(3), [50, 30, 21])
    train, test = stratified_split(labels, test_fraction=0.2, seed=0)
    assert np.bincount(labels[test]).tolist() == [10, 6, 4]
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(101))
    again = stratified_split(labels, test_fraction=0.2, seed=0)
    np.testing.assert_array_equal(test, again[1])
    assert not np.array_equal(test, stratified_split(labels, test_fraction=0.2, seed=1)[1])


def test_standardise_uses_training_statistics_and_spares_constant_columns() -> None:
    train = np.array([[1.0, 5.0], [3.0, 5.0]])
    test = np.array([[5.0, 7.0]])
    scaled_train, scaled_test = standardise(train, test)
    np.testing.assert_allclose(scaled_train, [[-1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(scaled_test, [[3.0, 2.0]])
    assert scaled_train.dtype == np.float32


def test_one_hot_leaves_unknown_values_blank() -> None:
    codes = one_hot(np.array(["b", "z", "a"]), ["a", "b"])
    np.testing.assert_array_equal(codes, [[0, 1], [0, 0], [1, 0]])

"""Preprocessing steps shared by the loaders: seeded splits, standardisation, one-hot codes.

Every statistic is fitted on training rows only and then applied to both splits, so no test
information reaches the features. All of it is a non-private preprocessing step, as in the
four papers this project reproduces.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

__all__ = ["STANDARDISED", "one_hot", "rng_for", "standardise", "stratified_split"]

STANDARDISED = "features standardised with the training rows' mean and standard deviation"
"""What `standardise` discloses of the training rows, for `Dataset.fitted`."""


def rng_for(seed: int, stream: str) -> np.random.Generator:
    """Returns a numpy Generator for ``seed`` on the named stream.

    Each use of randomness (a split, a partition kind, a generator) gets its own stream
    name, so changing how one consumes random numbers never shifts another.
    """
    return np.random.default_rng([int(seed), zlib.crc32(stream.encode())])


def stratified_split(
    labels: np.ndarray, *, test_fraction: float, seed: int, stream: str = "split"
) -> tuple[np.ndarray, np.ndarray]:
    """Returns sorted ``(train_rows, test_rows)`` with each class split in the same proportion.

    Class ``c`` with ``n_c`` rows sends ``round(test_fraction * n_c)`` of them, chosen
    uniformly at random, to the test set. Row order inside each split follows the input.

    Args:
        labels: integer label of every row.
        test_fraction: share of each class in the test set, in (0, 1).
        seed: seed of the split; the same seed gives the same split.
        stream: name of the random stream, so different loaders split independently.
    """
    rng = rng_for(seed, stream)
    keys = rng.random(len(labels))
    # Sorting by (label, random key) lays each class out in random order; the first
    # round(fraction * n_c) rows of each class block go to the test set.
    order = np.lexsort((keys, labels))
    sorted_labels = labels[order]
    _, starts, counts = np.unique(sorted_labels, return_index=True, return_counts=True)
    rank = np.arange(len(labels)) - np.repeat(starts, counts)
    num_test = np.rint(test_fraction * counts).astype(np.int64)
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[order] = rank < np.repeat(num_test, counts)
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def standardise(train: np.ndarray, test: np.ndarray, *, ddof: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Returns both arrays centred and scaled by the training mean and standard deviation.

    A column that is constant in training is centred only (divided by 1), so it becomes zero
    instead of NaN. Results are ``float32``.
    """
    train = np.asarray(train, dtype=np.float64)
    mean = train.mean(axis=0)
    std = train.std(axis=0, ddof=ddof) if len(train) > ddof else np.zeros(train.shape[1])
    scale = np.where(std > 0, std, 1.0)
    return (
        ((train - mean) / scale).astype(np.float32),
        ((np.asarray(test, dtype=np.float64) - mean) / scale).astype(np.float32),
    )


def one_hot(values: np.ndarray, categories: Sequence[str]) -> np.ndarray:
    """Returns a ``float32 [rows, len(categories)]`` indicator matrix of ``values``.

    A value not in ``categories`` gets an all-zero row (how a category seen only in test,
    or a missing value in the a9a encoding, is represented).
    """
    lookup = {category: index for index, category in enumerate(categories)}
    distinct, inverse = np.unique(np.asarray(values), return_inverse=True)
    codes = np.array([lookup.get(value, -1) for value in distinct.tolist()], dtype=np.int64)[inverse]
    out = np.zeros((len(values), len(categories)), dtype=np.float32)
    known = codes >= 0
    out[np.flatnonzero(known), codes[known]] = 1.0
    return out

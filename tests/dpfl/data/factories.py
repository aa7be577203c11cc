"""Small in-memory datasets for partition, user and transform tests (no files needed)."""

from __future__ import annotations

import numpy as np

from dpfl.data import Dataset


def labelled(
    class_sizes: list[int], *, num_features: int = 3, seed: int = 0, silos: list[int] | None = None
) -> Dataset:
    """Returns a Dataset whose training set has ``class_sizes[c]`` rows of class c, in class order.

    The test set is 10 random rows. With ``silos`` (one natural silo per training row), the
    dataset has natural silos named ``s0``, ``s1``, ...
    """
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(class_sizes)), class_sizes).astype(np.int64)
    silo_train = None if silos is None else np.asarray(silos, dtype=np.int64)
    names = None if silos is None else tuple(f"s{k}" for k in range(int(max(silos)) + 1))
    return Dataset(
        x_train=rng.standard_normal((len(y), num_features)).astype(np.float32),
        y_train=y,
        x_test=rng.standard_normal((10, num_features)).astype(np.float32),
        y_test=rng.integers(len(class_sizes), size=10).astype(np.int64),
        num_classes=len(class_sizes),
        name="factory",
        silo_train=silo_train,
        silo_names=names,
    )

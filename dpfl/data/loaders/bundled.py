"""Small datasets that ship inside scikit-learn: no files to find, no download.

Both are split 80/20, stratified by class, with seed 0 (``preprocessing.stratified_split``),
so the split is the same on every machine and does not depend on scikit-learn's RNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data import preprocessing
from dpfl.data.dataset import Dataset
from dpfl.data.preprocessing import STANDARDISED, stratified_split
from dpfl.data.registry import DATASETS
from dpfl.errors import SpecError

__all__ = ["load_breast_cancer", "load_digits"]

_TEST_FRACTION = 0.2
_SEED = 0


@DATASETS.register(
    "digits",
    description="UCI optical handwritten digits as bundled with scikit-learn: 1,797 images of 8x8 "
    "pixels, 10 classes; pixels divided by 16.",
    source_url="https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
    license="CC BY 4.0",
    num_classes=10,
    needs_files=False,
)
def load_digits(*, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool) -> Dataset:
    """Returns the 8x8 digits, pixels scaled from 0..16 to [0, 1], stratified 80/20 split (seed 0)."""
    # scikit-learn takes seconds to import; only these loaders and the heart split need it.
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    x = bunch.data.astype(np.float32) / np.float32(16.0)
    y = bunch.target.astype(np.int64)
    train, test = stratified_split(y, test_fraction=_TEST_FRACTION, seed=_SEED, stream="digits")
    return Dataset(
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        num_classes=10,
        name="digits",
        feature_names=tuple(bunch.feature_names),
    )


@DATASETS.register(
    "breast_cancer",
    description="Wisconsin Diagnostic Breast Cancer (WDBC) as bundled with scikit-learn: 569 tumours, "
    "30 features, 0 = malignant, 1 = benign; standardised.",
    source_url="https://archive.ics.uci.edu/dataset/17/breast+cancer+wisconsin+diagnostic",
    license="CC BY 4.0",
    num_classes=2,
    needs_files=False,
    unfitted={"standardise": "none"},
)
def load_breast_cancer(
    *, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool, standardise: str = "train"
) -> Dataset:
    """Returns WDBC, stratified 80/20 split (seed 0).

    Labels follow scikit-learn: 0 = malignant (212 tumours), 1 = benign (357).

    Args:
        standardise: ``"train"`` (with the training rows' mean and standard deviation) or
            ``"none"`` (features as recorded: no statistic of the records shapes them).
    """
    if standardise not in ("train", "none"):
        raise SpecError("dataset.standardise", f"must be 'train' or 'none'; got {standardise!r}.")
    from sklearn.datasets import load_breast_cancer as sklearn_breast_cancer

    bunch = sklearn_breast_cancer()
    y = bunch.target.astype(np.int64)
    train, test = stratified_split(y, test_fraction=_TEST_FRACTION, seed=_SEED, stream="breast_cancer")
    if standardise == "train":
        x_train, x_test = preprocessing.standardise(bunch.data[train], bunch.data[test])
    else:
        x_train, x_test = bunch.data[train].astype(np.float32), bunch.data[test].astype(np.float32)
    return Dataset(
        x_train=x_train,
        y_train=y[train],
        x_test=x_test,
        y_test=y[test],
        num_classes=2,
        name="breast_cancer",
        feature_names=tuple(bunch.feature_names),
        fitted=(STANDARDISED,) if standardise == "train" else (),
    )

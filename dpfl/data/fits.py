"""Fits of feature transforms that are constants of a checksummed dataset, shipped with the package.

A transform fitted on the training rows (`dpfl.data.transforms`) gives the same numbers every time
it is fitted on the same rows. MNIST's four files are fixed by their md5 (`locate` refuses any
other file), so the PCA of its training rows is a constant: fitting it (the 784 × 784 Gram matrix
of 60,000 rows, then its SVD) took 1.5–2.5 s of a fresh run's set-up on a 2-core machine, against
0.2–0.5 s for the 50 rounds of configs/isrl_mnist.yaml (issue 43). So its fit ships here, as
`pca_components` computed it (`scripts/ship_fits.py` writes it), and `load_prepared` hands it to
`pca` for a dataset loaded from its files with no options, before any other transform.

What ships is what `pca` uses: the training mean and the top `SHIPPED_PCA` components, both
float32, each component's sign fixed as `pca_components` fixes it; a component does not depend on
how many are asked for, so the first k rows are the fit of `pca: k` for every k ≤ `SHIPPED_PCA`.
A larger k is fitted on the rows as before. tests/dpfl/data/test_fits.py refits it on the files.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.transforms import PcaFit, pca_components

__all__ = ["SHIPPED_PCA", "shipped_fits", "write_shipped_pca"]

SHIPPED_PCA = 64  # components shipped per dataset (the papers' MNIST setting takes 50)
_FOLDER = Path(__file__).resolve().parent / "fits"
# Datasets whose files are fixed by checksum and whose loader takes no options.
_PCA_SHIPPED = ("mnist",)


def shipped_fits(name: str, options: Mapping[str, Any]) -> dict[str, PcaFit]:
    """Returns the shipped fits by transform name for dataset `name` loaded with `options`
    ({} when none ships: a dataset with options, or one whose files are not fixed)."""
    if name not in _PCA_SHIPPED or options:
        return {}
    fit = _read_pca(name)
    return {} if fit is None else {"pca": fit}


@functools.cache
def _read_pca(name: str) -> PcaFit | None:
    try:
        with np.load(_FOLDER / f"{name}_pca.npz", allow_pickle=False) as npz:
            return PcaFit(mean=npz["mean"], components=npz["components"])
    except (OSError, KeyError, ValueError):  # not installed with the package: fitted as before
        return None


def write_shipped_pca(name: str, dataset: Dataset) -> Path:
    """Writes the PCA fit of `dataset`'s training rows as `name`'s shipped fit; returns its path."""
    mean, components, _ = pca_components(dataset.x_train, SHIPPED_PCA)
    path = _FOLDER / f"{name}_pca.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, mean=mean.astype(np.float32), components=components.astype(np.float32))
    _read_pca.cache_clear()
    return path

"""Feature and label transforms applied after loading; each returns a new ``Dataset``.

A run spec names them as ``features: {pca: 50}``; ``apply_features`` applies such a mapping
in order. Every transform is fitted on the training rows only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.errors import SpecError
from dpfl.registry import Registry

__all__ = ["PcaFit", "apply_features", "binary_labels", "feature_transforms", "pca", "pca_components"]

_ROW_BLOCK = 8192


@dataclass(frozen=True)
class PcaFit:
    """A PCA fitted before, as `pca` applies it: the training mean (float32 [d]) and the top
    components (float32 [k, d], rows in decreasing variance, signs as `pca_components` fixes
    them). Serves `pca: j` for every j ≤ k: a component does not depend on how many are asked."""

    mean: np.ndarray
    components: np.ndarray


def pca_components(x_train: np.ndarray, num_components: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns ``(mean [d], components [k, d], variances [k])`` of the training rows.

    The components are the top-k right singular vectors of the centred training matrix
    ``X - 1μᵀ``, found by the SVD of its d x d Gram matrix ``(X - 1μᵀ)ᵀ(X - 1μᵀ)`` (the same
    vectors, and much cheaper than the SVD of X when rows far outnumber features).
    ``variances`` are the explained variances, eigenvalue / (n - 1), in decreasing order.

    Sign convention (the SVD fixes each vector only up to sign): each component is flipped
    so that its entry of largest absolute value is positive, so the result is the same on
    every machine.
    """
    mean = x_train.mean(axis=0, dtype=np.float64)
    gram = np.zeros((x_train.shape[1], x_train.shape[1]))
    # Centred float32 blocks accumulated in float64 keep memory at one block and the error
    # of the Gram matrix near 1e-7 relative.
    for start in range(0, len(x_train), _ROW_BLOCK):
        block = x_train[start : start + _ROW_BLOCK] - mean.astype(x_train.dtype)
        gram += (block.T @ block).astype(np.float64)
    _, eigenvalues, vt = np.linalg.svd(gram, hermitian=True)
    components = vt[:num_components]
    peak = np.abs(components).argmax(axis=1)
    components = components * np.sign(components[np.arange(num_components), peak])[:, None]
    return mean, components, eigenvalues[:num_components] / max(len(x_train) - 1, 1)


def pca(dataset: Dataset, num_components: int, *, fit: PcaFit | None = None) -> Dataset:
    """Returns the dataset projected on its top ``num_components`` principal components.

    Fitted on ``x_train`` only; both splits are centred by the training mean and projected
    (the ISRL-DP paper's MNIST setting is 784 -> 50, reference/000_isrl_dp.md §6.2). Labels
    and groupings are unchanged; features become ``pc1 .. pck`` (float32, not whitened).
    ``fit``: this very ``x_train``'s fit, computed before (`dpfl.data.fits`: shipped for a dataset
    fixed by checksum); used when it holds enough components, else the rows are fitted.

    Raises:
        SpecError: ``num_components`` is not in [1, min(num_train, num_features)].
    """
    upper = min(dataset.num_train, dataset.num_features)
    if (
        not isinstance(num_components, int | np.integer)
        or isinstance(num_components, bool)
        or not 1 <= num_components <= upper
    ):
        raise SpecError(
            "dataset.features.pca",
            f"must be an integer in [1, {upper}] (at most the number of "
            f"training rows and of features of {dataset.name!r}); got {num_components!r}.",
        )
    k = int(num_components)
    if fit is not None and len(fit.components) >= k and fit.mean.shape == (dataset.num_features,):
        shift, basis = fit.mean, fit.components[:k].T  # the layout the fitted branch gives
    else:
        mean, components, _ = pca_components(dataset.x_train, k)
        basis = components.T.astype(np.float32)
        shift = mean.astype(np.float32)
    return dataset.with_features(
        x_train=(dataset.x_train - shift) @ basis,
        x_test=(dataset.x_test - shift) @ basis,
        feature_names=tuple(f"pc{j + 1}" for j in range(int(num_components))),
        fitted=f"PCA to {int(num_components)} components fitted on the training rows",
    )


def binary_labels(dataset: Dataset, positive: Sequence[int]) -> Dataset:
    """Returns the dataset with label 1 for the classes in ``positive`` and 0 for the others.

    The ISRL-DP paper's MNIST task is even (1) vs odd (0): ``positive=(0, 2, 4, 6, 8)``. A
    label-skew partition should be drawn on the original labels first, then relabelled.

    Raises:
        SpecError: ``positive`` is empty, holds every class, or names a class that does not exist.
    """
    classes = np.unique(np.asarray(positive, dtype=np.int64))
    if (
        classes.size == 0
        or classes.size >= dataset.num_classes
        or classes.min() < 0
        or classes.max() >= dataset.num_classes
    ):
        raise SpecError(
            "dataset.labels.positive",
            f"must name some but not all of the classes 0..."
            f"{dataset.num_classes - 1}; got {list(positive)!r}.",
        )
    return replace(
        dataset,
        y_train=np.isin(dataset.y_train, classes).astype(np.int64),
        y_test=np.isin(dataset.y_test, classes).astype(np.int64),
        num_classes=2,
        class_names=None,
    )


FEATURE_TRANSFORMS: Registry[Callable[[Dataset, Any], Dataset]] = Registry(
    "feature transform", field="dataset.features"
)
FEATURE_TRANSFORMS.add("pca", pca)


def feature_transforms() -> list[str]:
    """Returns the names ``apply_features`` accepts."""
    return FEATURE_TRANSFORMS.names()


def apply_features(
    dataset: Dataset, features: Mapping[str, Any], *, fits: Mapping[str, Any] | None = None
) -> Dataset:
    """Returns ``dataset`` with each named transform applied in order, e.g. ``{"pca": 50}``.

    ``fits``: fits of transforms on this very dataset as loaded (`dpfl.data.fits.shipped_fits`),
    by transform name; only the first transform sees the data they were fitted on.

    Raises:
        UnknownNameError: a name is not a feature transform; the message lists them.
    """
    for i, (name, argument) in enumerate(features.items()):
        transform = FEATURE_TRANSFORMS[name]
        if i == 0 and fits and name in fits:
            dataset = transform(dataset, argument, fit=fits[name])
        else:
            dataset = transform(dataset, argument)
    return dataset

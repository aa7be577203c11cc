"""The in-memory form every loader returns: train and test arrays plus natural groupings."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["Dataset"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled classification data set, split into train and test, ready for simulation.

    The arrays are plain numpy: features ``float32`` of shape ``[rows, num_features]``,
    labels ``int64`` in ``[0, num_classes)``. Rows keep the order their loader documents, so
    an index into ``x_train`` is a stable record id for partitions and user allocations.

    Natural groupings are optional and only present where the data has them:

    - ``silo_train`` / ``silo_test``: ``int64`` silo index per row, in ``[0, len(silo_names))``
      (the four hospitals of ``heart``, the generated silos of ``synthetic``, a CSV's silo
      column). ``partition(kind="natural")`` uses them.
    - ``user_train``: ``int64`` user id per training row (a CSV's user column), for
      user-level DP across silos.

    Attributes:
        x_train: training features, ``float32 [num_train, num_features]``.
        y_train: training labels, ``int64 [num_train]``.
        x_test: test features, ``float32 [num_test, num_features]``.
        y_test: test labels, ``int64 [num_test]``.
        num_classes: number of classes; labels lie in ``[0, num_classes)``.
        name: registry name of the loader that built it, e.g. ``"mnist"``.
        feature_names: one name per feature column, or ``None`` for raw pixels.
        silo_train: silo index of each training row, or ``None``.
        silo_test: silo index of each test row, or ``None``.
        user_train: user id of each training row, or ``None``.
        silo_names: one name per silo, set exactly when ``silo_train`` is.
        class_names: one name per class (a CSV's label values), or ``None`` for ``class 0``, ….
        fitted: what was fitted on the training rows without noise (e.g. "features standardised
            with the training rows' mean and standard deviation"): a disclosure of private data
            the privacy ledger does not cover, listed in every run's caveats.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str
    feature_names: tuple[str, ...] | None = None
    silo_train: np.ndarray | None = None
    silo_test: np.ndarray | None = None
    user_train: np.ndarray | None = None
    silo_names: tuple[str, ...] | None = None
    fitted: tuple[str, ...] = ()
    class_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check_features("x_train", self.x_train)
        _check_features("x_test", self.x_test)
        if self.x_train.shape[1] != self.x_test.shape[1]:
            raise ValueError(
                f"x_train has {self.x_train.shape[1]} features but x_test has {self.x_test.shape[1]}"
            )
        _check_ids("y_train", self.y_train, len(self.x_train), self.num_classes)
        _check_ids("y_test", self.y_test, len(self.x_test), self.num_classes)
        if self.feature_names is not None and len(self.feature_names) != self.x_train.shape[1]:
            raise ValueError(
                f"feature_names has {len(self.feature_names)} names for {self.x_train.shape[1]} features"
            )
        if (self.silo_train is None) != (self.silo_names is None):
            raise ValueError("silo_train and silo_names must be given together")
        if self.silo_train is not None:
            num_silos = len(self.silo_names)
            _check_ids("silo_train", self.silo_train, len(self.x_train), num_silos)
            if self.silo_test is not None:
                _check_ids("silo_test", self.silo_test, len(self.x_test), num_silos)
        elif self.silo_test is not None:
            raise ValueError("silo_test needs silo_train and silo_names")
        if self.user_train is not None:
            _check_ids("user_train", self.user_train, len(self.x_train), None)
        if self.class_names is not None and len(self.class_names) != self.num_classes:
            raise ValueError(f"class_names has {len(self.class_names)} names for {self.num_classes} classes")

    @property
    def num_features(self) -> int:
        """Number of feature columns."""
        return int(self.x_train.shape[1])

    @property
    def num_train(self) -> int:
        """Number of training rows."""
        return len(self.y_train)

    @property
    def num_test(self) -> int:
        """Number of test rows."""
        return len(self.y_test)

    @property
    def num_silos(self) -> int | None:
        """Number of natural silos, or ``None`` when the data has no natural grouping."""
        return None if self.silo_names is None else len(self.silo_names)

    def parity(self) -> Dataset:
        """Returns the dataset with two classes: even labels become 1, odd ones 0 (as the ISRL-DP
        paper's even-vs-odd MNIST task labels them)."""
        return replace(
            self,
            y_train=(self.y_train % 2 == 0).astype(np.int64),
            y_test=(self.y_test % 2 == 0).astype(np.int64),
            num_classes=2,
            class_names=("odd", "even"),
        )

    def with_features(
        self,
        x_train: np.ndarray,
        x_test: np.ndarray,
        feature_names: tuple[str, ...] | None,
        *,
        fitted: str | None = None,
    ) -> Dataset:
        """Returns a copy with new feature matrices; labels and groupings are kept. `fitted` says
        what the new features were fitted on the training rows with, when they were."""
        more = () if fitted is None else (fitted,)
        return replace(
            self, x_train=x_train, x_test=x_test, feature_names=feature_names, fitted=self.fitted + more
        )


def _check_features(name: str, x: np.ndarray) -> None:
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 2:
        got = f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
        raise ValueError(f"{name} must be a 2-D float32 numpy array; got {got}")


def _check_ids(name: str, ids: np.ndarray, rows: int, upper: int | None) -> None:
    if not isinstance(ids, np.ndarray) or ids.dtype != np.int64 or ids.shape != (rows,):
        got = f"{type(ids).__name__} {getattr(ids, 'dtype', '')} {getattr(ids, 'shape', '')}"
        raise ValueError(f"{name} must be an int64 numpy array of shape ({rows},); got {got}")
    if rows and (ids.min() < 0 or (upper is not None and ids.max() >= upper)):
        bound = "" if upper is None else f" and < {upper}"
        raise ValueError(f"{name} must be >= 0{bound}; got values in [{ids.min()}, {ids.max()}]")

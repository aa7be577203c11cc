"""Partitions of a training set across silos: the ``Partition`` type and the ``partition`` entry point.

Every kind assigns each training record to exactly one silo (``natural`` may leave a silo
empty; the others never do). Kinds are registered by name in ``partition_kinds``; the
randomness of each kind comes from ``np.random.default_rng([seed, stream])`` with its own
stream, so a partition is reproducible from ``(kind, num_silos, seed, options)`` alone.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.partition_kinds import KINDS
from dpfl.data.preprocessing import rng_for
from dpfl.errors import SpecError

__all__ = ["Partition", "keep_per_silo", "partition", "partition_kinds"]


@dataclass(frozen=True, eq=False)
class Partition:
    """Which training records each silo holds.

    Attributes:
        silo_indices: one sorted ``int64`` array per silo of indices into the training set;
            together they hold every training index exactly once.
        labels: the training labels the indices refer to (``dataset.y_train``).
        num_classes: number of classes of the dataset.
        kind: the partition kind that produced it, e.g. ``"dirichlet"``.
    """

    silo_indices: list[np.ndarray]
    labels: np.ndarray
    num_classes: int
    kind: str

    @property
    def num_silos(self) -> int:
        """Number of silos."""
        return len(self.silo_indices)

    @property
    def sizes(self) -> np.ndarray:
        """Number of training records per silo, ``int64 [num_silos]``."""
        return np.array([len(rows) for rows in self.silo_indices], dtype=np.int64)

    def silo_of_record(self) -> np.ndarray:
        """Returns the silo of every training record, ``int64 [num_train]`` (-1 if none holds it)."""
        silo = np.full(len(self.labels), -1, dtype=np.int64)
        silo[np.concatenate(self.silo_indices)] = np.repeat(np.arange(self.num_silos), self.sizes)
        return silo

    def label_histogram(self) -> np.ndarray:
        """Returns record counts per silo and class, ``int64 [num_silos, num_classes]``."""
        silo = self.silo_of_record()
        held = silo >= 0
        flat = silo[held] * self.num_classes + self.labels[held]
        counts = np.bincount(flat, minlength=self.num_silos * self.num_classes)
        return counts.reshape(self.num_silos, self.num_classes).astype(np.int64)


def partition_kinds() -> list[str]:
    """Returns the registered partition kinds, sorted."""
    return KINDS.names()


def partition(dataset: Dataset, *, kind: str, num_silos: int, seed: int, **options: Any) -> Partition:
    """Returns a partition of ``dataset``'s training set into ``num_silos`` silos.

    Kinds (options in brackets; see ``dpfl.data.partition_kinds`` for the definitions):

    - ``iid``: a uniformly random split into near-equal sizes.
    - ``dirichlet`` [alpha=0.5, min_size=1]: label skew; each class is spread over the silos
      by proportions drawn from Dirichlet(α) (Hsu et al. 2019).
    - ``shards`` [labels_per_silo=2]: each silo gets that many single-label shards
      (McMahan et al. 2017), so at most ``labels_per_silo`` distinct labels.
    - ``label_sets`` [labels_per_silo=6]: each silo holds exactly that many distinct labels, each
      class spread evenly over its silos (the voting paper's MNIST split: 100 silos x 6 digits).
    - ``pairs``: one silo per (even class, odd class) pair, 25 for MNIST: the ISRL-DP
      paper's digit-pair split (reference/000_isrl_dp.md §6.2), without its duplicates.
    - ``natural``: the dataset's own silos (``dataset.silo_train``); ``num_silos`` must match.
    - ``quantity`` [alpha=0.5, min_size=1]: quantity skew; silo sizes from Dirichlet(α),
      labels i.i.d.

    Args:
        dataset: the data whose training rows are partitioned.
        kind: a registered partition kind.
        num_silos: number of silos, >= 1.
        seed: seed, >= 0; the same arguments give the same partition.
        **options: the kind's options.

    Raises:
        UnknownNameError: ``kind`` is not registered.
        SpecError: a bad ``num_silos``, ``seed`` or option (field ``dataset.partition.<name>``).
    """
    split = KINDS[kind]
    _check_int("dataset.silos", num_silos, 1)
    _check_int("dataset.partition.seed", seed, 0)
    parameters = inspect.signature(split).parameters.values()
    allowed = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    for option in options:
        if option not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            raise SpecError(
                f"dataset.partition.{option}",
                f"is not an option of partition kind {kind!r}; allowed options: {listed}.",
            )
    if kind != "natural" and num_silos > dataset.num_train:
        raise SpecError(
            "dataset.silos",
            f"must be <= the {dataset.num_train} training records so that no silo is empty; got {num_silos}.",
        )
    silo = split(dataset, num_silos, rng_for(seed, f"partition/{kind}"), **options)
    order = np.argsort(silo, kind="stable")
    counts = np.bincount(silo, minlength=num_silos)
    indices = [rows.astype(np.int64) for rows in np.split(order, np.cumsum(counts)[:-1])]
    return Partition(silo_indices=indices, labels=dataset.y_train, num_classes=dataset.num_classes, kind=kind)


def _check_int(field: str, value: object, minimum: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise SpecError(field, f"must be an integer >= {minimum}; got {value!r}.")


def keep_per_silo(split: Partition, records: int, *, seed: int) -> Partition:
    """Returns the partition with each silo cut to `records` of its records, drawn uniformly
    from the seed (a smaller silo keeps all of its own); the rest belong to no silo."""
    rng = rng_for(seed, "partition/records_per_silo")
    kept = [
        rows if len(rows) <= records else np.sort(rng.choice(rows, size=records, replace=False))
        for rows in split.silo_indices
    ]
    return Partition(silo_indices=kept, labels=split.labels, num_classes=split.num_classes, kind=split.kind)

"""A dataset prepared for simulation: the spec's silos and users drawn (`federate`), then tensors,
the silos' record indices and the model's input shape (`FederatedData`)."""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.data import Dataset, Partition, UserAllocation, natural_users, partition, users, users_first
from dpfl.data.partition import keep_per_silo
from dpfl.spec import DatasetSpec

__all__ = ["FederatedData", "federate"]

# Image datasets whose rows are flattened pixels; image models see them as (H, W) again.
_IMAGE_SHAPES = {
    "mnist": (28, 28),
    "cifar10": (3, 32, 32),
    "femnist": (28, 28),
    "svhn": (3, 32, 32),
    "usps": (16, 16),
    "digit_domains": (32, 32),
}


@dataclass(frozen=True)
class FederatedData:
    """Training and test tensors plus each silo's training-record indices.

    Attributes:
        x_train, y_train: all training records [N, *input_shape] (float32) and labels [N] (int64).
        x_test, y_test: the held-out test set.
        silos: one int64 index tensor per silo, into the training records.
        input_shape: one sample's shape, as the model sees it.
        num_classes: number of labels.
        label_histogram: [silos, classes] record counts, for the dashboard's partition chart.
        users: the user of every silo's records (user-level DP), or None.
        fitted: what was fitted on the training rows without noise (`Dataset.fitted`).
        class_names: one name per class (`Dataset.class_names`), or None for ``class 0``, ….
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    silos: tuple[torch.Tensor, ...]
    input_shape: tuple[int, ...]
    num_classes: int
    label_histogram: np.ndarray
    users: UserAllocation | None = None
    fitted: tuple[str, ...] = ()
    class_names: tuple[str, ...] | None = None

    @classmethod
    def build(
        cls, dataset: Dataset, partition: Partition, *, image: bool, users: UserAllocation | None = None
    ) -> FederatedData:
        """Returns the tensors of `dataset` split by `partition`; `image` keeps 2-D pixel rows."""
        shape: tuple[int, ...] = (dataset.num_features,)
        if (
            image
            and dataset.name in _IMAGE_SHAPES
            and dataset.num_features == np.prod(_IMAGE_SHAPES[dataset.name])
        ):
            shape = _IMAGE_SHAPES[dataset.name]
        return cls(
            x_train=torch.as_tensor(dataset.x_train, dtype=torch.float32).reshape(-1, *shape),
            y_train=torch.as_tensor(dataset.y_train, dtype=torch.long),
            x_test=torch.as_tensor(dataset.x_test, dtype=torch.float32).reshape(-1, *shape),
            y_test=torch.as_tensor(dataset.y_test, dtype=torch.long),
            silos=tuple(torch.tensor(i, dtype=torch.long) for i in partition.silo_indices),
            input_shape=shape,
            num_classes=dataset.num_classes,
            label_histogram=partition.label_histogram(),
            users=users,
            fitted=dataset.fitted,
            class_names=dataset.class_names,
        )

    def to(self, device: torch.device) -> FederatedData:
        """Returns the data with its tensors on `device` (itself when they are there already): moved
        once per run, so that rounds gather batches where they compute."""
        if self.x_train.device == torch.device(device):
            return self
        return dataclasses.replace(
            self,
            x_train=self.x_train.to(device),
            y_train=self.y_train.to(device),
            x_test=self.x_test.to(device),
            y_test=self.y_test.to(device),
            silos=tuple(s.to(device) for s in self.silos),
        )

    @functools.cached_property
    def silo_sizes(self) -> np.ndarray:
        """Returns the number of training records of each silo (read-only; computed once)."""
        sizes = np.array([len(s) for s in self.silos])
        sizes.setflags(write=False)
        return sizes


# Silos and users drawn, by the prepared dataset they were drawn from (remembered by identity while
# `dpfl.data.prepared` keeps it) and by the spec's data fields and seed: a sweep's runs of one seed
# draw the same silos, and sorting MNIST's 60,000 records by class took 9 of a run's 12 ms of
# preparation. The arrays are read-only, and each caller gets lists of its own.
_DRAWN: weakref.WeakKeyDictionary[Dataset, OrderedDict[tuple[str, int], tuple]] = weakref.WeakKeyDictionary()
_DRAWN_KEPT = 32  # per dataset: a worker's runs of many seeds keep the latest
_DRAWN_LOCK = threading.Lock()


def federate(
    dataset: Dataset, ds: DatasetSpec, *, seed: int
) -> tuple[Dataset, Partition, UserAllocation | None]:
    """Returns the dataset as the run sees it (`labels` applied), its silos' records
    (`records_per_silo` applied) and, when the spec names users, the user of every record.

    The one way a spec's silos are drawn: the run (`prepare`) and the ε preview's partition
    chart both call it, so they show the same silos.
    """
    key = (repr(ds.model_dump()), seed)  # repr keeps every float (JSON would write inf as null)
    with _DRAWN_LOCK:  # the API's threads preview partitions
        drawn = _DRAWN.setdefault(dataset, OrderedDict())
        if key not in drawn:
            drawn[key] = _kept(dataset, *_federate(dataset, ds, seed=seed))
            while len(drawn) > _DRAWN_KEPT:
                drawn.popitem(last=False)
        drawn.move_to_end(key)
        out, split, owners = drawn[key]
    out = dataset if out is None else out
    split = dataclasses.replace(split, silo_indices=list(split.silo_indices))
    owners = None if owners is None else dataclasses.replace(owners, user_ids=list(owners.user_ids))
    return out, split, owners


def _kept(
    dataset: Dataset, out: Dataset, split: Partition, owners: UserAllocation | None
) -> tuple[Dataset | None, Partition, UserAllocation | None]:
    """Returns what `federate` keeps of a draw: its arrays read-only, and the dataset drawn from
    left out (a value holding its key would keep the entry alive for good)."""
    for array in [*split.silo_indices, *([] if owners is None else owners.user_ids)]:
        array.setflags(write=False)
    return (None if out is dataset else out), split, owners


def _federate(
    dataset: Dataset, ds: DatasetSpec, *, seed: int
) -> tuple[Dataset, Partition, UserAllocation | None]:
    u = ds.users
    if u is not None and u.silo_alpha is not None:
        split, owners = users_first(
            dataset.y_train,
            dataset.num_classes,
            num_silos=ds.silos,
            num_users=u.count,
            kind=u.kind,
            seed=seed,
            zipf_alpha=u.zipf_alpha,
            silo_alpha=u.silo_alpha,
        )
    else:
        split = partition(
            dataset, kind=ds.partition.kind, num_silos=ds.silos, seed=seed, **ds.partition.options()
        )
        if ds.records_per_silo is not None:
            split = keep_per_silo(split, ds.records_per_silo, seed=seed)
        if u is None:
            owners = None
        elif u.kind == "natural":
            owners = natural_users(dataset, split)
        else:
            owners = users(
                split,
                num_users=u.count,
                kind=u.kind,
                seed=seed,
                zipf_alpha=u.zipf_alpha,
                main_silo_probability=u.main_silo_probability,
            )
    if ds.labels == "parity":  # after the silos are drawn: the partition may split by the classes
        dataset = dataset.parity()
        split = Partition(split.silo_indices, dataset.y_train, dataset.num_classes, split.kind)
    return dataset, split, owners

"""The server's data in the voting setting: an unlabelled public pool carved from the test split.

The voting paper's server holds unlabelled records from its own distribution and a test set
(reference/003_voting_dpfl.md §1.1, §4.1: MNIST non-IID uses 30% of MNIST's test split as the
public pool and the other 70% for testing). We carve the pool from the dataset's test split:
a permutation drawn from the run's seed puts `size` records in the pool, in random order (so
the first Q are a uniformly random choice of queries), and the rest stay the test set, in
their original order. The pool's true labels are kept only for bookkeeping (how many released
labels are right); no algorithm's release depends on them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch
from pydantic import Field

from dpfl.data.transforms import pca_components
from dpfl.errors import SpecError
from dpfl.federation import FederatedData

__all__ = ["FrozenFeatures", "HeldOutPool", "ServerSplit", "carve_public_pool", "frozen_features"]

# The baselines' `public_pool` (DP-FedAvg, DP-FedSGD): the voting methods' pool held out of their
# test split too, so that a comparison tests every method on the same records.
HeldOutPool = Annotated[
    int,
    Field(
        ge=0,
        le=1_000_000,
        description="test records held out as the voting methods' public pool (unused here)",
    ),
]

FrozenFeatures = Annotated[
    int,
    Field(
        ge=0,
        le=10_000,
        description="frozen features: 0 trains on the raw inputs; k projects every input on the top k "
        "principal components of the public pool (public data only, fitted before any agent trains)",
    ),
]

_POOL_STREAM = 0x9B1C  # the pool's permutation has its own stream of the run's seed


@dataclass(frozen=True)
class ServerSplit:
    """The public pool and the data whose test split is what remains.

    Attributes:
        data: the federated data with `x_test`, `y_test` reduced to the records not in the pool.
        pool_x: the pool's features [size, *input_shape], in query order.
        pool_y: the pool's true labels [size] (bookkeeping only).
        pool_rows: each pool record's row in the original test split.
    """

    data: FederatedData
    pool_x: torch.Tensor
    pool_y: torch.Tensor
    pool_rows: np.ndarray


def carve_public_pool(
    data: FederatedData, *, size: int, seed: int, field: str = "params.public_pool"
) -> ServerSplit:
    """Returns `data` with `size` random test records moved to the public pool (0 moves none).

    Raises:
        SpecError: `size` leaves no test record (the message names `field` and the allowed range).
    """
    n = len(data.y_test)
    if not 0 <= size <= n - 1:
        raise SpecError(
            field,
            f"must be between 0 and {n - 1} (the dataset has {n} test records and at least one must "
            f"stay for testing); got {size}.",
        )
    order = np.random.default_rng([seed, _POOL_STREAM]).permutation(n)
    pool = order[:size]
    rest = torch.as_tensor(np.sort(order[size:]), dtype=torch.long)
    rows = torch.as_tensor(pool, dtype=torch.long)
    reduced = dataclasses.replace(data, x_test=data.x_test[rest], y_test=data.y_test[rest])
    return ServerSplit(reduced, data.x_test[rows], data.y_test[rows], pool)


def frozen_features(split: ServerSplit, components: int, *, field: str = "params.pool_pca") -> ServerSplit:
    """Returns the split with every input (agents' records, test set, pool) projected on the top
    `components` principal components of the public pool.

    The map is fitted on the pool only, so it depends on public data and costs no privacy: the
    nearest we can offer to the paper's backbone pretrained on public data (reference §4.1).

    Raises:
        SpecError: `components` exceeds the pool's records or the inputs' features (names `field`).
    """
    if not len(split.pool_x):
        raise SpecError(field, "needs a public pool to be fitted on: set params.public_pool above 0.")
    pool = split.pool_x.reshape(len(split.pool_x), -1)
    upper = min(pool.shape)
    if not 1 <= components <= upper:
        raise SpecError(
            field,
            f"must be between 1 and {upper} (the public pool's records and the inputs' features); "
            f"got {components}.",
        )
    mean, basis, _ = pca_components(pool.cpu().numpy(), components)
    shift = torch.as_tensor(mean, dtype=torch.float32)
    project = torch.as_tensor(basis.T, dtype=torch.float32)

    def frozen(x: torch.Tensor) -> torch.Tensor:
        return (x.reshape(len(x), -1) - shift) @ project

    data = dataclasses.replace(
        split.data,
        x_train=frozen(split.data.x_train),
        x_test=frozen(split.data.x_test),
        input_shape=(components,),  # not in `fitted`: that lists maps fitted on private rows
    )
    return ServerSplit(data, frozen(split.pool_x), split.pool_y, split.pool_rows)

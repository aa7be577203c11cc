"""kNN-DPFL (reference/003_voting_dpfl.md §2.3, Algorithm 3): agents vote their neighbours' labels.

Each agent finds the k records of its own that are nearest to the query in a fixed public
feature space and votes their label frequencies (counts / k). The feature space is raw pixels
or a PCA fitted on the public pool only (the pool is public, so the map costs no privacy); the
paper uses an ImageNet backbone, which the project does not ship.

Sensitivity at instance level: adding or removing one record of an agent changes at most one
of its k neighbours, so the summed vote moves by (e_new − e_old)/k, of L2 norm √2/k (the
paper prints √(2/k); the note's §3.2 explains the slip). With k fixed, not a fraction of the
agent's size, this is exact. At agent level it is 1.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS
from dpfl.algorithms.voting.base import VotingAlgorithm, VotingParams
from dpfl.algorithms.voting.votes import knn_votes
from dpfl.data.transforms import pca_components
from dpfl.errors import SpecError

__all__ = ["KNNDPFL", "KNNParams"]


class KNNParams(VotingParams):
    level: Literal["agent", "instance"] = Field(
        "instance", description="privacy unit: one record of any agent, or one agent's whole data"
    )
    k: int = Field(
        10, ge=1, le=10_000, description="neighbours per agent (fixed, so the sensitivity is √2/k)"
    )
    features: Literal["raw", "pca"] = Field(
        "pca", description="feature space: raw inputs, or PCA of the public pool"
    )
    pca_components: int = Field(50, ge=1, le=10_000, description="PCA dimensions (features: pca)")


@ALGORITHMS.register("knn_dpfl")
class KNNDPFL(VotingAlgorithm):
    """kNN-DPFL: each agent votes the label frequencies of its k nearest records to the query."""

    Params = KNNParams
    method = "knn"
    notion = "instance"
    summary = "agents vote the labels of their k nearest records to each public query; a student learns them"
    # Of the voting datasets (VotingAlgorithm), those with at least the default 50 PCA components'
    # worth of features: adult 108, mnist 784, synthetic 60, svhn 3,072, digit_domains 1,024, usps
    # 256 (logistic has 10).
    default_datasets = frozenset({"adult", "cifar10", "digit_domains", "mnist", "svhn", "synthetic", "usps"})

    def __init__(self, spec, data, model):
        super().__init__(spec, data, model)
        p = self.params
        smallest = int(self.data.silo_sizes.min())
        if p.k > smallest:
            raise SpecError(
                "params.k", f"must be ≤ {smallest}, the records of the smallest agent; got {p.k}."
            )
        dims = int(np.prod(self.data.input_shape))
        upper = min(p.public_pool, dims)
        if p.features == "pca" and p.pca_components > upper:
            raise SpecError(
                "params.pca_components",
                f"must be ≤ {upper} (the public pool's records and the input's {dims} features); "
                f"got {p.pca_components}.",
            )

    def vote_key(self) -> dict[str, Any]:
        p = self.params
        return {
            "k": p.k,
            "features": p.features,
            "pca_components": p.pca_components if p.features == "pca" else None,
        }

    def compute_votes(self, rows: int) -> np.ndarray:
        p, data = self.params, self.data
        train = data.x_train.reshape(len(data.x_train), -1)
        pool = self.pool_x.reshape(len(self.pool_x), -1)
        if p.features == "pca":
            mean, components, _ = pca_components(pool.cpu().numpy(), p.pca_components)
            basis = torch.as_tensor(components.T, dtype=torch.float32)
            shift = torch.as_tensor(mean, dtype=torch.float32)
            train, pool = (train - shift) @ basis, (pool - shift) @ basis
        votes = knn_votes(train, data.y_train, data.silos, pool[:rows], k=p.k, num_classes=data.num_classes)
        return votes.cpu().numpy()

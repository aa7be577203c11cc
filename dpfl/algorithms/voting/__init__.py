"""Voting-based private FL of Zhu et al. (seed 003; reference/003_voting_dpfl.md) and its baselines.

Agents do not send gradients: they vote on labels for the server's unlabelled public records,
only the noisy winning label is released, and the server trains a student on those labels.

One module per piece: `split` (the public pool carved from the test split), `votes` (vote
histograms for all agents at once, the noisy argmax), `cache` (noiseless histograms reused
across σ), `training` (batched SGD of the local models and the student), `accounting`
(sensitivities, the paper's σ, the per-query table), `base` (the shared round loop), `ae`
(AE-DPFL), `knn` (kNN-DPFL), and the gradient baselines `dp_fedavg` (agent level) and
`dp_fedsgd` (instance level).
"""

from dpfl.algorithms.voting.accounting import paper_sigma, query_table, vote_sensitivity
from dpfl.algorithms.voting.ae import AEDPFL
from dpfl.algorithms.voting.base import VotingAlgorithm, level_party
from dpfl.algorithms.voting.cache import clear_vote_cache
from dpfl.algorithms.voting.dp_fedavg import DPFedAvg
from dpfl.algorithms.voting.dp_fedsgd import DPFedSGD
from dpfl.algorithms.voting.knn import KNNDPFL

__all__ = [
    "AEDPFL",
    "KNNDPFL",
    "DPFedAvg",
    "DPFedSGD",
    "VotingAlgorithm",
    "clear_vote_cache",
    "level_party",
    "paper_sigma",
    "query_table",
    "vote_sensitivity",
]

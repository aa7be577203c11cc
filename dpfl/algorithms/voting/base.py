"""What AE-DPFL and kNN-DPFL share: the public pool, the noisy votes, the ledger and the student.

Fitting the runner's round loop: the Q queries are split evenly over the run's rounds; round r
answers its batch (noisy argmax of each query's summed votes, one `VoteEvent` per query in the
ledger) and, on the rounds the runner evaluates, trains the server's student from scratch on
every label released so far. `global_params` is that student, so each evaluated round shows
the accuracy the server would have if it stopped there, next to the ε spent so far.

σ (the spec's `noise_multiplier`) is the paper's σ: the standard deviation of the noise on
each coordinate of the *summed* vote histogram (reference/003_voting_dpfl.md §2). Each
agent adds its share N(0, σ²/N). The ledger event carries σ and the level's sensitivity.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from dpfl.algorithms.base import Algorithm, Params, RoundOutput
from dpfl.algorithms.voting.accounting import paper_sigma, vote_sensitivity
from dpfl.algorithms.voting.cache import cached_votes, vote_cache_key
from dpfl.algorithms.voting.split import FrozenFeatures, carve_public_pool, frozen_features
from dpfl.algorithms.voting.training import train_sgd
from dpfl.algorithms.voting.votes import noisy_argmax
from dpfl.errors import SpecError
from dpfl.federation import FederatedData
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import VoteEvent
from dpfl.privacy.ledger import Ledger
from dpfl.spec import RunSpec

__all__ = ["STUDENT_STREAM", "VotingAlgorithm", "VotingParams", "level_party"]

STUDENT_STREAM = 9
"""Stream of the student's minibatch order (the local models use their own)."""


def level_party(level: str) -> str:
    """Returns the ledger party of a voting run: whoever the level protects, in all agents' votes."""
    return "agents" if level == "agent" else "instances"


class VotingParams(Params):
    level: Literal["agent", "instance"] = Field(
        "agent", description="privacy unit: one agent's whole data, or one record of any agent"
    )
    public_pool: int = Field(
        1000, ge=1, le=1_000_000, description="test records moved to the server's unlabelled public pool"
    )
    queries: int = Field(500, ge=1, le=1_000_000, description="Q: public records labelled by a noisy vote")
    student_epochs: int = Field(30, ge=1, le=1000, description="epochs of the student on the released labels")
    student_lr: float = Field(0.05, gt=0, le=10, description="student learning rate (SGD with momentum)")
    student_batch_size: int = Field(32, ge=1, le=100_000, description="student minibatch size")
    student_momentum: float = Field(0.9, ge=0, lt=1, description="student momentum")
    pool_pca: FrozenFeatures = 0

    @model_validator(mode="after")
    def _queries_in_pool(self) -> VotingParams:
        if self.queries > self.public_pool:
            raise ValueError(
                f"`queries` must be ≤ `public_pool` ({self.public_pool}): each query is a record of the "
                f"public pool; got {self.queries}"
            )
        return self


class VotingAlgorithm(Algorithm):
    """A noisy-argmax vote of all agents on each public query, and a student on the answers.

    Subclasses say how the noiseless votes are computed (`compute_votes`), what determines
    them (`vote_key`, for the cache) and the vote's sensitivity at each level.
    """

    Params = VotingParams
    method: ClassVar[str] = ""  # "ae" or "knn", for the sensitivity table
    # The released labels against the public pool's truth, and the data-independent ε; the
    # noiseless votes' statistics and the data-dependent ε are diagnostics.
    private_metrics = frozenset(
        {"queries_answered", "label_accuracy", "votes_cached", "epsilon_data_independent"}
    )
    trusted = (
        "secure aggregation: each agent adds N(0, σ²/N) to its votes, enough only in the sum, which the "
        "agents are trusted to aggregate securely (simulated here)"
    )
    paper = "003: Zhu et al., Voting-based Approaches for Differentially Private Federated Learning"
    # The registered datasets whose test split holds the default public pool (1,000 records) and
    # a test record more: adult 16,281, logistic 10,000, mnist 10,000, synthetic 1,824, svhn 26,032,
    # digit_domains 9,298, usps 2,007 (digits has 359, heart 254, breast_cancer 113). Others run
    # with a smaller `params.public_pool`, which `carve_public_pool` checks on the loaded data
    # (tests/dpfl/test_requirements.py).
    default_datasets = frozenset(
        {"adult", "cifar10", "digit_domains", "logistic", "mnist", "svhn", "synthetic", "usps"}
    )
    pool_from_test = True

    @classmethod
    def notion_of(cls, params: VotingParams) -> str:
        """The notion follows the privacy level (the class default is the usual one)."""
        return params.level

    def __init__(self, spec: RunSpec, data: FederatedData, model: torch.nn.Module):
        super().__init__(spec, data, model)
        p = self.params
        self.notion = self.notion_of(p)
        if spec.dataset.features:
            raise SpecError(
                "dataset.features",
                f"must be empty for {self.name}: feature transforms are fitted on the agents' private "
                "training records, which the vote's privacy analysis does not cover.",
            )
        if spec.participation is not None:
            raise SpecError("participation", f"is not used by {self.name}: every agent votes on every query.")
        if spec.rounds > p.queries:
            raise SpecError(
                "rounds",
                f"must be ≤ params.queries ({p.queries}) for {self.name}: each round answers a batch "
                f"of queries; got {spec.rounds}.",
            )
        split = carve_public_pool(data, size=p.public_pool, seed=spec.seed)
        if p.pool_pca:
            split = frozen_features(split, p.pool_pca)
        self.use_data(split.data, field="params.pool_pca")
        self.pool_x, self.pool_y = split.pool_x, split.pool_y
        self.num_agents = len(data.silos)

    @property
    def sensitivity(self) -> float:
        """Returns the L2 sensitivity of one query's summed histogram at the run's level."""
        return vote_sensitivity(self.method, self.params.level, k=getattr(self.params, "k", None))

    @property
    def party(self) -> str:
        return level_party(self.params.level)

    def queries_of(self, r: int) -> tuple[int, int]:
        """Returns the half-open range of query indices round r answers."""
        q, rounds = self.params.queries, self.spec.rounds
        return q * (r - 1) // rounds, q * r // rounds

    def plan(self, noise_multiplier: float) -> Ledger:
        ledger = Ledger()
        event = VoteEvent(float(noise_multiplier), self.sensitivity)
        for r in range(1, self.spec.rounds + 1):
            lo, hi = self.queries_of(r)
            for _ in range(hi - lo):
                ledger.record(r, self.party, event)
        return ledger

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray:
        """The paper's σ: Theorem 5 with Lemma 10's (classic) conversion, solved for σ."""
        return np.asarray(
            paper_sigma(
                epsilon=epsilon, delta=delta, queries=self.params.queries, sensitivity=self.sensitivity
            )
        )

    @abc.abstractmethod
    def vote_key(self) -> dict[str, Any]:
        """Returns what, besides dataset, partition, seed and pool, determines the votes."""

    @abc.abstractmethod
    def compute_votes(self, rows: int) -> np.ndarray:
        """Returns the noiseless summed votes on the first `rows` public records, [rows, C]."""

    def check_noise(self, noise_multiplier) -> None:
        """Refuses no σ, and a σ per agent: every vote's histogram gets one noise."""
        if noise_multiplier is None:
            raise SpecError("privacy", f"is required for {self.name}: give `epsilon` or `noise_multiplier`.")
        sigmas = np.unique(np.asarray(noise_multiplier, dtype=float))
        if sigmas.size != 1:
            raise SpecError(
                "privacy.noise_multiplier", f"must be one σ for all agents' votes; got {sigmas.tolist()}."
            )

    def setup(self, noise_multiplier) -> None:
        self.check_noise(noise_multiplier)
        self.sigma = float(np.unique(np.asarray(noise_multiplier, dtype=float))[0])
        key = vote_cache_key(
            {
                "method": self.method,
                "dataset": self.spec.dataset.model_dump(mode="json"),
                "seed": self.noise_key,
                "public_pool": self.params.public_pool,
                "pool_pca": self.params.pool_pca,
                **self.vote_key(),
            }
        )
        # the whole pool's votes: a run with another Q (a sensitivity table) reads its prefix
        votes, self.votes_cached = cached_votes(key, self.params.public_pool, self.compute_votes)
        self.votes = votes[: self.params.queries]
        self.released = np.full(self.params.queries, -1, dtype=np.int64)
        self.init = self.layout.flatten_module(self.model)
        self.student = self.init.clone()
        # the votes so far, both ways: composed round by round, not re-accounted from the start
        self.vote_accountants = {name: make_accountant(name) for name in ("rdp", "pate")}

    def round(self, r: int) -> RoundOutput:
        lo, hi = self.queries_of(r)
        counts = self.votes[lo:hi]
        labels, _ = noisy_argmax(
            counts, sigma=self.sigma, num_agents=self.num_agents, seed=self.noise_key, round=r
        )
        self.released[lo:hi] = labels
        events = [VoteEvent(self.sigma, self.sensitivity, tuple(c.tolist())) for c in counts]
        for accountant in self.vote_accountants.values():
            for event in events:
                accountant.compose(event)
        if r % self.spec.evaluation_interval == 0 or r == self.spec.rounds:
            self.student = self.train_student(hi)
        return RoundOutput(metrics=self.metrics(lo, hi), releases={self.party: events})

    def train_student(self, answered: int) -> torch.Tensor:
        """Returns the student trained from its initialisation on the first `answered` released labels."""
        p = self.params
        labels = torch.as_tensor(self.released[:answered], dtype=torch.long)
        return train_sgd(
            self.model,
            self.layout,
            self.init.unsqueeze(0),
            self.pool_x[:answered],
            labels,
            (torch.arange(answered),),
            epochs=p.student_epochs,
            batch_size=p.student_batch_size,
            lr=p.student_lr,
            momentum=p.student_momentum,
            seed=self.noise_key,
            stream=STUDENT_STREAM,
        )[0]

    def metrics(self, lo: int, hi: int) -> dict[str, float]:
        """Returns the labels' quality so far, this round's margins, the cache flag and ε both ways.

        `epsilon_data_independent` is Theorem 5 (`rdp`), `epsilon_data_dependent` the PATE
        bound from the recorded histograms (`pate`, never larger; not itself DP, see
        `PATEAccountant`); `data_dependent_tighter` is 1 when the second is the smaller.
        """
        truth = self.pool_y[:hi].cpu().numpy()
        majority = self.votes[:hi].argmax(axis=1)
        released = self.released[:hi]
        top2 = np.sort(self.votes[lo:hi], axis=1)[:, -2:]
        delta = self.spec.privacy.delta
        indep = self.vote_accountants["rdp"].epsilon(delta)
        dep = self.vote_accountants["pate"].epsilon(delta)
        return {
            "queries_answered": float(hi),
            "label_accuracy": float(np.mean(released == truth)),
            "majority_agreement": float(np.mean(released == majority)),
            "noiseless_label_accuracy": float(np.mean(majority == truth)),
            "mean_vote_gap": float(np.mean(top2[:, 1] - top2[:, 0])),
            "votes_cached": float(self.votes_cached),
            "epsilon_data_independent": indep,
            "epsilon_data_dependent": dep,
            "data_dependent_tighter": float(dep < indep * (1 - 1e-9)),
        }

    @property
    def global_params(self) -> torch.Tensor:
        return self.student

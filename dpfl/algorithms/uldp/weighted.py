"""ULDP-SGD, ULDP-AVG and ULDP-AVG-w: per-user weighted clipping (reference §2.4–2.8).

Each silo s computes, for every user u with records in it, a contribution from those records
alone (ULDP-SGD: the mean gradient at the server's model; ULDP-AVG: the delta after Q local
epochs on a fresh copy of the model), clips it to C, and adds it with weight w_{s,u}. The
weights satisfy Σ_s w_{s,u} ≤ 1 for every user, so one user moves the sum over silos by at
most C whatever the number of its records (proof C.3). Each silo adds N(0, σ²C²/|S|); the
total carries σ²C², a Gaussian mechanism with multiplier σ per round. Weights are uniform
(1/|S|) or records-proportional (n_{s,u}/N_u, ULDP-AVG-w); with `secure_weighting` the
records-proportional sum is computed by the private weighting protocol (`secure`), which
gives the same model up to its fixed-point precision and reports its cost per round.

User sub-sampling (the -s / -ws variants, §2.6): each round every user is kept with
probability q, one decision for all silos, and the release is accounted as a Poisson-sampled
Gaussian. The server divides the noisy sum by |U|·|S|·q (the expected number of user–silo
pairs) and applies η_g, as the paper's code does (§2.4 "Normalisation").

All (silo, user) pairs are computed together in blocks (`groups`): one batched computation
per block, never a loop over users. The authors' ULDP-SGD divided each user's mean gradient by
the batch size a second time; here it is the plain mean gradient (§2.5).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput, participants
from dpfl.algorithms.uldp.fedavg_2lr import PAPER
from dpfl.algorithms.uldp.groups import RecordGroups, local_deltas
from dpfl.algorithms.uldp.secure import SecureWeighting
from dpfl.algorithms.uldp.users import (
    USERS_PARTY,
    clip_rows,
    require_one_noise_multiplier,
    require_users,
    user_level_plan,
)
from dpfl.device import add_rows_
from dpfl.engine import mean_grad, release_noise
from dpfl.errors import SpecError
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["ULDPSGD", "ULDPAvg", "ULDPAvgW", "ULDPWeighted"]

_GRADIENT_CHUNK = 256  # records per batched gradient call of ULDP-SGD


class ULDPSGDParams(Params):
    global_lr: float = Field(10.0, gt=0, le=100_000, description="server learning rate η_g")
    clip: float = Field(0.1, gt=0, le=1e4, description="clipping norm C of each user's contribution")
    weighting: Literal["uniform", "records"] = Field(
        "uniform", description="w_{s,u}: uniform 1/|S|, or records n_{s,u}/N_u"
    )
    user_sampling_rate: float = Field(
        1.0, gt=0, le=1, description="probability q that a user takes part in a round (1: all)"
    )


class ULDPAvgParams(ULDPSGDParams):
    local_lr: float = Field(0.01, gt=0, le=100, description="local learning rate η_l")
    local_epochs: int = Field(5, ge=1, le=1000, description="local epochs Q on each user's records")
    batch_size: int = Field(64, ge=1, le=100_000, description="local minibatch size B")


class ULDPAvgWParams(ULDPAvgParams):
    weighting: Literal["records"] = Field("records", description="w_{s,u} = n_{s,u}/N_u")
    secure_weighting: bool = Field(
        False, description="compute the weights with the private protocol (Paillier, secure aggregation)"
    )
    key_bits: int = Field(2048, ge=1024, le=4096, description="Paillier modulus size of the private protocol")
    n_max: int = Field(
        1000, ge=1, le=5000, description="records per user the private protocol supports (R = lcm(1..n_max))"
    )


class ULDPWeighted(Algorithm):
    """The shared round of ULDP-SGD and ULDP-AVG; subclasses say what one user contributes."""

    notion = "user"
    requires_users = True  # weights and clipping are per user
    paper = PAPER
    private_metrics = frozenset({"silo_noise_std", "update_noise_std"})  # σ, C, q and public counts
    trusted = (
        "secure aggregation: each silo adds noise σC/√|S|, enough only in the sum over silos, which "
        "the silos are trusted to aggregate securely (simulated here; the private weighting protocol "
        "computes it from ciphertexts)"
    )
    direction = 1.0  # +1: contributions are deltas (added); −1: gradients (subtracted)
    batched = True
    needs_contributions = False  # whether `aggregate` needs each pair's clipped contribution

    @property
    @abc.abstractmethod
    def records_per_step(self) -> int:
        """Records of one group in one batched computation (sizes the blocks of groups)."""

    def plan(self, noise_multiplier: float) -> Ledger:
        return user_level_plan(self.spec, self.release_event(float(noise_multiplier)))

    def release_event(self, sigma: float) -> Event:
        """Returns one round's release: a Gaussian, Poisson-sampled over users when q < 1."""
        q = self.params.user_sampling_rate
        event: Event = GaussianEvent(sigma)
        return event if q >= 1 else PoissonSampledEvent(q, event)

    def check_noise(self, noise_multiplier) -> None:
        require_one_noise_multiplier(self.name, noise_multiplier)

    def setup(self, noise_multiplier) -> None:
        self.check_noise(noise_multiplier)
        self.sigma = float(noise_multiplier)
        self.users = require_users(self.name, self.data)
        counts = self.users.counts().astype(np.float64)
        if self.params.weighting == "records":
            self.weights = counts / np.maximum(counts.sum(axis=0, keepdims=True), 1)
        else:
            self.weights = np.full(counts.shape, 1.0 / self.spec.silos_per_round)
        self.w = self.layout.flatten_module(self.model).detach().clone()
        self._groups: dict[tuple[int, ...], RecordGroups] = {}

    def sampled_users(self, r: int) -> np.ndarray | None:
        """Returns round r's Poisson sample of users (bool [U]), or None when q = 1."""
        q = self.params.user_sampling_rate
        if q >= 1:
            return None
        rng = np.random.default_rng([self.noise_key, r, 0x05E125])
        return rng.random(self.users.num_users) < q

    def groups(self, silos: np.ndarray, sampled: np.ndarray | None) -> RecordGroups:
        """Returns the (silo, user) pairs of the listed silos (only sampled users, if sampling)."""
        if sampled is not None:
            return RecordGroups.of_users(self.data, self.users, silos, sampled)
        key = tuple(int(s) for s in silos)
        if key not in self._groups:
            self._groups[key] = RecordGroups.of_users(self.data, self.users, silos)
        return self._groups[key]

    @abc.abstractmethod
    def contributions(
        self, groups: RecordGroups, block: slice, r: int, start: torch.Tensor, seeds: list[int]
    ) -> torch.Tensor:
        """Returns the unclipped contribution of each group of the block, [G_block, P], from
        each group's run's model `start` [G_block, P] (`seeds`: the runs' seeds).

        The result must be a tensor of its own: `silo_sums` clips and weights it in place. `start`
        is read only (for one run it is a broadcast view of the run's model)."""

    @classmethod
    def silo_sums(
        cls,
        runs: Sequence[ULDPWeighted],
        r: int,
        silos: Sequence[np.ndarray],
        groups: RecordGroups,
        *,
        keep: bool,
    ) -> tuple[list[torch.Tensor], torch.Tensor | None, list[float]]:
        """Returns per run Σ_u w_{s,u} Clip(contribution) per listed silo [S, P] (before noise),
        the clipped contributions [G, P] in `groups`' order when `keep` (else None: they can take
        gigabytes), and per run the fraction of its contributions clipped.

        `groups` holds every run's (silo, user) pairs (`RecordGroups.concat`); each block is one
        computation whatever runs its groups belong to."""
        first = runs[0]
        models = torch.stack([run.w for run in runs])
        seeds = [run.noise_key for run in runs]
        offsets = np.cumsum([0, *(len(chosen) for chosen in silos)])
        # row of (run, silo) in the stacked sums, and every run's weights (one shape: one dataset)
        position = np.full((len(runs), first.spec.dataset.silos), -1, dtype=np.int64)
        for k, chosen in enumerate(silos):
            position[k, np.asarray(chosen, dtype=np.int64)] = offsets[k] + np.arange(len(chosen))
        weights = np.stack([run.weights for run in runs])
        sums = torch.zeros(offsets[-1], first.layout.size, dtype=first.w.dtype)
        clipped = torch.empty(len(groups), first.layout.size, dtype=first.w.dtype) if keep else None
        counted = np.zeros((len(runs), 2))  # per run: contributions clipped, contributions
        for block in groups.blocks(first.data, params=first.layout.size, batch_size=first.records_per_step):
            run = groups.run[block]
            # one run: its model as a view, not a [G_block, P] copy (contributions copy what they step)
            start = models[0].expand(len(run), -1) if len(runs) == 1 else models[torch.as_tensor(run)]
            # the contributions are this block's own: clipped and weighted in place
            rows, was_clipped = clip_rows(
                first.contributions(groups, block, r, start, seeds), first.params.clip, in_place=True
            )
            if clipped is not None:
                clipped[block] = rows
            np.add.at(counted, (run, 0), was_clipped.cpu().numpy())
            np.add.at(counted, (run, 1), 1.0)
            silo, user = groups.silo[block], groups.user[block]
            at = torch.as_tensor(position[run, silo])
            weight = torch.as_tensor(weights[run, silo, user], dtype=rows.dtype)
            add_rows_(sums, at, rows.mul_(weight[:, None]))
        fractions = [clipped_n / max(n, 1) for clipped_n, n in counted]
        return list(sums.split([len(chosen) for chosen in silos])), clipped, fractions

    def aggregate(
        self,
        r: int,
        silos: np.ndarray,
        sums: torch.Tensor,
        clipped: torch.Tensor,
        groups: RecordGroups,
        noise: torch.Tensor,
        sampled: np.ndarray | None,
    ) -> torch.Tensor:
        """Returns what the server decrypts: Σ_s (silo sum + noise), [P]. (Secure aggregation's
        result; the private weighting protocol computes the same sum from ciphertexts.)"""
        return (sums + noise).sum(0)

    def round(self, r: int) -> RoundOutput:
        return self.rounds_together([self], r)[0]

    @classmethod
    def round_many(cls, runs: Sequence[ULDPWeighted], r: int) -> list[RoundOutput]:
        if not cls.batched:  # a subclass whose round is its own
            return super().round_many(runs, r)
        return cls.rounds_together(runs, r)

    @classmethod
    def rounds_together(cls, runs: Sequence[ULDPWeighted], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: every run's (silo, user) pairs are groups of one set of
        blocks, each from its own run's model and seed; then each run noises and steps alone."""
        silos = [participants(run.spec, r, run.noise_key) for run in runs]
        sampled = [run.sampled_users(r) for run in runs]
        parts = [run.groups(chosen, users) for run, chosen, users in zip(runs, silos, sampled, strict=True)]
        groups = parts[0] if len(parts) == 1 else RecordGroups.concat(parts)
        keep = runs[0].needs_contributions  # only ULDP-AVG-w's protocol, which is not batched
        assert not keep or len(runs) == 1, "the private weighting protocol runs one run at a time"
        sums, clipped, fractions = cls.silo_sums(runs, r, silos, groups, keep=keep)
        return [
            run.conclude(r, *each, clipped)
            for run, *each in zip(runs, silos, sampled, parts, sums, fractions, strict=True)
        ]

    def conclude(
        self,
        r: int,
        silos: np.ndarray,
        sampled: np.ndarray | None,
        groups: RecordGroups,
        sums: torch.Tensor,
        frac: float,
        clipped: torch.Tensor | None = None,
    ) -> RoundOutput:
        """Returns round r's output once the listed silos' weighted sums [S, P] are known: each silo
        adds its noise share, and the server steps."""
        p = self.params
        std = self.sigma * p.clip / math.sqrt(len(silos))
        noise = release_noise(sums, std, seed=self.noise_key, silos=silos, round=r, secure_sum=True)
        total = self.aggregate(r, silos, sums, clipped, groups, noise, sampled)
        scale = p.global_lr / (self.users.num_users * len(silos) * p.user_sampling_rate)
        self.w = self.w + self.direction * scale * total
        metrics = {
            "clip_fraction": frac,
            "user_silo_pairs": float(len(groups)),
            "silo_noise_std": std,
            "update_noise_std": scale * self.sigma * p.clip,
        }
        if sampled is not None:
            metrics["users_sampled"] = float(sampled.sum())
        return RoundOutput(metrics=metrics, releases={USERS_PARTY: [self.release_event(self.sigma)]})

    @property
    def global_params(self) -> torch.Tensor:
        return self.w


@ALGORITHMS.register("uldp_sgd")
class ULDPSGD(ULDPWeighted):
    """ULDP-SGD: each user's mean gradient per silo, clipped and weighted; server descends."""

    Params = ULDPSGDParams
    summary = "user-level DP: per-user clipped, weighted gradients; noise σC/√|S| per silo"
    direction = -1.0
    records_per_step = _GRADIENT_CHUNK

    def contributions(self, groups, block, r, start, seeds) -> torch.Tensor:
        """Each group's mean gradient, in chunks of records: a chunk weighs (its records)/(the
        group's), and only groups with records in it take part, so no block is padded to its
        largest group."""
        index, count = groups.index[block], groups.count[block]
        total = torch.zeros(len(count), self.layout.size, dtype=self.w.dtype)
        for first in range(0, int(count.max()), _GRADIENT_CHUNK):
            active = int((count > first).sum())  # a prefix: counts decrease along the block
            cols = torch.arange(first, min(first + _GRADIENT_CHUNK, index.shape[1]))
            mask = cols[None, :] < count[:active, None]
            batch = groups.batch(self.data, index[:active, cols], mask)
            share = (mask.sum(1) / count[:active]).to(self.w.dtype)
            total[:active] += share[:, None] * mean_grad(self.model, self.layout, start[:active], batch)
        return total


@ALGORITHMS.register("uldp_avg")
class ULDPAvg(ULDPWeighted):
    """ULDP-AVG: each user trains its own copy for Q epochs per silo; deltas clipped and weighted."""

    Params = ULDPAvgParams
    summary = "user-level DP: per-user local training, clipped weighted deltas; noise σC/√|S| per silo"

    @property
    def records_per_step(self) -> int:
        return self.params.batch_size

    def contributions(self, groups, block, r, start, seeds) -> torch.Tensor:
        return local_deltas(self, groups, block, r, start=start, seeds=seeds)


@ALGORITHMS.register("uldp_avg_w")
class ULDPAvgW(ULDPAvg):
    """ULDP-AVG with weights n_{s,u}/N_u, optionally computed by the private weighting protocol."""

    Params = ULDPAvgWParams
    summary = "ULDP-AVG with records-proportional weights n_su/N_u (optionally by Paillier protocol)"
    # its round adds the private weighting protocol's costs, and the protocol runs per run
    batched = False

    @property
    def needs_contributions(self) -> bool:
        return self.secure is not None

    @classmethod
    def cost_warning(cls, spec, params) -> str | None:
        if not params.secure_weighting:
            return None
        users = spec.dataset.users.count if spec.dataset.users is not None else None
        return (
            "the private weighting protocol computes Paillier exponentiations for every silo, user and "
            "model coordinate in every round: 30 users on 4 silos with logreg on digits (650 coordinates) "
            f"took 45 s a round on 2 cores; this run has {spec.dataset.silos} silos"
            + (f" and {users} users" if users else "")
            + f" over {spec.rounds} rounds"
        )

    def __init__(self, spec, data, model):
        super().__init__(spec, data, model)
        # A spec-level check, made on construction so that `runner.prepare` (submission) refuses it.
        if self.params.secure_weighting and spec.silos_per_round != spec.dataset.silos:
            raise SpecError("participation", "must be all silos with `params.secure_weighting`.")

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        self.secure = None
        if self.params.secure_weighting:
            self.secure = SecureWeighting(
                self.users.counts(),
                key_bits=self.params.key_bits,
                n_max=self.params.n_max,
                seed=self.noise_key,
            )

    def aggregate(self, r, silos, sums, clipped, groups, noise, sampled) -> torch.Tensor:
        """With `secure_weighting`, the sum comes from the private weighting protocol: silos send
        Paillier ciphertexts of their weighted contributions and no party learns n_{s,u} or N_u."""
        if self.secure is None:
            return super().aggregate(r, silos, sums, clipped, groups, noise, sampled)
        dense = torch.zeros(len(silos), self.users.num_users, self.layout.size, dtype=clipped.dtype)
        dense[torch.as_tensor(groups.silo), torch.as_tensor(groups.user)] = clipped  # silos are 0..S-1
        return self.secure.aggregate(r, list(dense), list(noise), sampled)

    def round(self, r: int) -> RoundOutput:
        out = super().round(r)
        if self.secure is not None:
            cost = self.secure.cost
            out.metrics |= {
                "secure_setup_s": cost.setup_s,
                "secure_encrypt_s": cost.encrypt_s,
                "secure_silo_s": max(cost.silo_s),
                "secure_aggregate_s": cost.aggregate_s,
                "secure_bytes_per_silo": float(cost.bytes_per_silo),
            }
        return out

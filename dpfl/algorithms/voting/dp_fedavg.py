"""DP-FedAvg (McMahan et al. 2018), the voting paper's agent-level baseline (reference §2.7).

Each round every agent takes part with probability q (Poisson sampling, drawn from the seed,
so it is part of the plan). A sampled agent runs E local SGD steps from the server's model
and sends its update Δ_i = w_i − w clipped to L2 norm S (the whole flattened update). The
secure aggregate adds N(0, σ²S²) to the sum of clipped updates (MPC is assumed for every
method, §1.4; the noise is drawn once for the sum, which has the distribution of the agents'
summed shares). The server divides by the expected number of participants qN, a fixed
denominator that keeps the sensitivity S, and steps: w ← w + η_s·(Σ clip(Δ_i) + noise)/(qN).

Each round is one Poisson-sub-sampled Gaussian with noise multiplier σ under add/remove one
agent, recorded under the party `agents`.

Adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially private
learning with adaptive clipping", Alg. 1 and Thm 1): each sampled agent also sends the bit
b_i = 1[‖Δ_i‖ ≤ S], centred as b_i − ½ (sensitivity ½); the server estimates the unclipped
fraction b̃ = (Σ(b_i − ½) + N(0, σ_b²))/(qN) + ½ and moves S ← S·exp(−η_C (b̃ − γ)) toward the
γ-quantile of update norms. Releasing both is the same as one Gaussian of multiplier
σ = (σ_Δ⁻² + (2σ_b)⁻²)^(−½), so the ledger keeps one event with σ, and the update noise uses
σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, Algorithm, Params, RoundOutput
from dpfl.algorithms.fedavg import local_sgd_many
from dpfl.algorithms.voting.split import FrozenFeatures, HeldOutPool, carve_public_pool, frozen_features
from dpfl.engine import release_noise
from dpfl.errors import SpecError
from dpfl.privacy.events import Event, GaussianEvent, PoissonSampledEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["DPFedAvg", "DPFedAvgParams"]

_SERVER = -1  # pseudo-silo id of the aggregate's noise generators
_UPDATE_NOISE, _COUNT_NOISE, _SAMPLING = 0, 1, 2


class DPFedAvgParams(Params):
    lr: float = Field(0.05, gt=0, le=100, description="local learning rate")
    lr_decay: float = Field(1.0, gt=0, le=1, description="local learning rate × lr_decay each round")
    local_steps: int = Field(20, ge=1, le=1000, description="E: local SGD steps per round")
    batch_size: int = Field(32, ge=1, le=100_000, description="local minibatch size")
    sample_rate: float = Field(
        0.1, gt=0, le=1, description="q: probability that an agent takes part in a round"
    )
    clip: float = Field(
        1.0, gt=0, le=1e4, description="S: L2 clipping norm of an agent's update (initial, if adaptive)"
    )
    server_lr: float = Field(1.0, gt=0, le=100, description="server learning rate on the averaged update")
    adaptive_clip: bool = Field(
        False, description="adapt S to a quantile of update norms (Andrew et al. 2021)"
    )
    target_quantile: float = Field(0.5, gt=0, lt=1, description="γ: the update-norm quantile S tracks")
    clip_lr: float = Field(0.2, gt=0, le=10, description="η_C: geometric step of the clip norm")
    count_noise: float | None = Field(
        None, gt=0, le=1e6, description="σ_b: noise std on the clipped-agent count (default qN/20)"
    )
    public_pool: HeldOutPool = 0
    pool_pca: FrozenFeatures = 0


@ALGORITHMS.register("dp_fedavg")
class DPFedAvg(Algorithm):
    """DP-FedAvg: Poisson-sampled agents, clipped local updates, Gaussian noise on their sum."""

    Params = DPFedAvgParams
    notion = "agent"
    paper = "003: Zhu et al. (baseline: McMahan et al. 2018, DP-FedAvg)"
    summary = "agent-level DP federated averaging: clipped updates of sampled agents, noisy sum"
    private_metrics = frozenset({"clip"})  # the adaptive clip follows the noisy count only
    batched = True
    trusted = (
        "a trusted aggregator: the agents' clipped updates are summed and the noise is added to the "
        "sum (by the server here), so no single update is private on its own"
    )

    def __init__(self, spec, data, model):
        super().__init__(spec, data, model)
        if spec.participation is not None:
            raise SpecError(
                "participation",
                f"is not used by {self.name}: agents are Poisson-sampled at params.sample_rate; remove it.",
            )
        split = carve_public_pool(data, size=self.params.public_pool, seed=spec.seed)
        if self.params.pool_pca:
            split = frozen_features(split, self.params.pool_pca)
        self.use_data(split.data, field="params.pool_pca")
        self.num_agents = len(data.silos)

    def event(self, noise_multiplier: float) -> Event:
        """Returns one round's release under noise multiplier σ."""
        q = self.params.sample_rate
        gaussian = GaussianEvent(float(noise_multiplier))
        return gaussian if q >= 1 else PoissonSampledEvent(q, gaussian)

    def plan(self, noise_multiplier: float) -> Ledger:
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            ledger.record(r, "agents", self.event(noise_multiplier))
        return ledger

    @property
    def expected_agents(self) -> float:
        """Returns qN, the fixed denominator of the averaged update, with N the spec's agents: a
        public number. The agents the data holds would put the count of agents, which
        add/remove-one-agent DP protects, into every release (the black-box audit measured it)."""
        return self.params.sample_rate * self.spec.dataset.silos

    @property
    def count_noise(self) -> float | None:
        """Returns σ_b, the noise std on the clipped-agent count (None without the adaptive clip)."""
        p = self.params
        if not p.adaptive_clip:
            return None
        return p.count_noise if p.count_noise is not None else self.expected_agents / 20

    def check_noise(self, noise_multiplier) -> None:
        """Refuses no σ, and a count noise σ_b ≤ σ/2, which leaves the update no finite noise."""
        if noise_multiplier is None:
            raise SpecError("privacy", f"is required for {self.name}: give `epsilon` or `noise_multiplier`.")
        sigma, count_sigma = float(np.asarray(noise_multiplier, dtype=float).reshape(-1)[0]), self.count_noise
        if count_sigma is not None and not 2 * count_sigma > sigma:
            raise SpecError(
                "params.count_noise",
                f"must be > σ/2 = {sigma / 2:.4g} so that the update noise stays finite "
                f"(σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½)); got {count_sigma:.4g}.",
            )

    def setup(self, noise_multiplier) -> None:
        self.check_noise(noise_multiplier)
        p = self.params
        self.sigma = float(np.asarray(noise_multiplier, dtype=float).reshape(-1)[0])
        self.update_sigma, self.count_sigma = self.sigma, self.count_noise
        if self.count_sigma is not None:
            self.update_sigma = (self.sigma**-2 - (2 * self.count_sigma) ** -2) ** -0.5
        self.clip = p.clip
        self.w = self.layout.flatten_module(self.model).detach().clone()

    def sampled(self, r: int) -> np.ndarray:
        """Returns the agents (sorted ids) sampled in round r: each independently with probability q."""
        rng = np.random.default_rng([self.noise_key, r, _SAMPLING, 0xFEDA])
        return np.flatnonzero(rng.random(self.num_agents) < self.params.sample_rate)

    def round(self, r: int) -> RoundOutput:
        return self.round_many([self], r)[0]

    @classmethod
    def round_many(cls, runs: Sequence[DPFedAvg], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: every run's sampled agents are rows of one local-SGD
        computation, each from its own run's model and seed; then each run clips, noises and
        steps alone, under its own σ and generators."""
        p = runs[0].params  # a batch shares every param
        agents = [run.sampled(r) for run in runs]
        lr = p.lr * p.lr_decay ** (r - 1)
        local = local_sgd_many(runs, agents, r, lr=lr, batch_size=p.batch_size, steps=p.local_steps)
        return [run.conclude(r, a, models) for run, a, models in zip(runs, agents, local, strict=True)]

    def conclude(self, r: int, agents: np.ndarray, local: torch.Tensor) -> RoundOutput:
        """Returns round r's output from the sampled agents' local models [len(agents), P]: their
        clipped updates and the noise go into the sum, and the server steps."""
        p = self.params
        total = torch.zeros(self.layout.size)
        unclipped, norms = 0.0, torch.zeros(0)
        if len(agents):
            updates = local - self.w
            norms = torch.linalg.vector_norm(updates, dim=1)
            total = (updates * (self.clip / norms.clamp(min=self.clip)).unsqueeze(1)).sum(0)
            unclipped = float((norms <= self.clip).sum())
        noise = release_noise(
            total[None],
            self.update_sigma * self.clip,
            seed=self.noise_key,
            silos=[_SERVER],
            round=r,
            stream=_UPDATE_NOISE,
        )[0]
        self.w = self.w + p.server_lr * (total + noise) / self.expected_agents
        metrics = {
            "clip": self.clip,
            "sampled_agents": float(len(agents)),
            "clip_fraction": float((norms > self.clip).float().mean()) if len(agents) else 0.0,
        }
        if self.count_sigma is not None:
            count = release_noise(
                torch.tensor([[unclipped - len(agents) / 2]]),
                self.count_sigma,
                seed=self.noise_key,
                silos=[_SERVER],
                round=r,
                stream=_COUNT_NOISE,
            )
            centred = unclipped - len(agents) / 2 + float(count[0, 0])
            fraction = centred / self.expected_agents + 0.5
            self.clip = self.clip * math.exp(-p.clip_lr * (fraction - p.target_quantile))
        return RoundOutput(metrics=metrics, releases={"agents": [self.event(self.sigma)]})

    @property
    def global_params(self) -> torch.Tensor:
        return self.w

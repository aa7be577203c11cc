"""The shared round of the second-order family: L local steps on every client at once, then the mean.

Each communication round every participating client starts from the server's model w̄, takes
L local steps w ← w − α_t·p_t on its own ridge-regularised logistic loss, and the server sets
w̄ to the plain mean of the clients' models (Algorithm 1 of reference/001_gdp_localnewton.md;
the server sees only the models). Subclasses say what direction p_t a step takes and what it
releases; the step size α_t (fixed, decaying or line search) and the bookkeeping live here.

Privacy (notion `gdp`): every noisy release is recorded as one GDPEvent(1/σ) of its client,
so a client's ledger composes to √(number of releases)/σ and the run's μ is the maximum over
clients (disjoint data, Lemma 3). T counts local iterations, R·L, as in the paper: every local
step releases, even the ones the server never sees. The relation is replace-one record
(`neighbouring: replace_one` on every event): the noise is scaled by the client's size s_k.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import Algorithm, Params, RoundOutput, participants, silo_party
from dpfl.algorithms.newton.objective import DTYPE, ClientData, client_data, losses
from dpfl.algorithms.newton.steps import decayed_step, line_search
from dpfl.errors import SpecError
from dpfl.privacy.accountants.gdp import gdp_mu
from dpfl.privacy.events import Event, GDPEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["ClippedParams", "Direction", "LocalSolver", "NewtonParams", "SolverParams"]

PAPER = "001: Cao, Guo & Zhang, Privacy-Preserving Distributed Learning via Newton Algorithm (2023)"


class SolverParams(Params):
    """What every algorithm of the family takes: the loss, the local steps and the step size."""

    ridge: float = Field(0.001, gt=0, le=100, description="ridge γ of the logistic loss")
    local_steps: int = Field(1, ge=1, le=100, description="local iterations L per communication round")
    step: Literal["line_search", "fixed", "decay"] = Field(
        "fixed", description="step-size rule: fixed α, decaying α_t, or the paper's line search"
    )
    lr: float = Field(
        0.03, gt=0, le=100, description="the fixed step, the first decaying step, or the line search's α*"
    )
    decay_rate: float = Field(0.5, gt=0, le=1, description="ρ of the decaying step")
    decay_form: Literal["geometric", "compounding"] = Field(
        "geometric", description="α_t = α₀ρ^t (geometric) or α_{t+1} = ρ^{t+1}α_t (compounding)"
    )
    feature_clip: float | None = Field(
        1.0, gt=0, le=1e4, description="each record's features are scaled to norm ≤ R (None: not scaled)"
    )


class ClippedParams(SolverParams):
    """The private members' clipping: R bounds each record's features, Γ its gradient.

    With rows of norm ≤ R, the logistic loss bounds each record's gradient by R and its Hessian by
    B = R²/4 (objective.py); Γ < R clips the gradient further.
    """

    feature_clip: float = Field(
        1.0, gt=0, le=1e4, description="R: records scaled to norm ≤ R (a Newton step's Hessian: B = R²/4)"
    )
    grad_clip: float | None = Field(
        None,
        gt=0,
        le=1e4,
        description="Γ: each record's gradient clipped to norm Γ (None: Γ = R, never binding)",
    )

    @property
    def grad_bound(self) -> float:
        """Returns Γ, the bound on one record's gradient."""
        return self.feature_clip if self.grad_clip is None else self.grad_clip


class NewtonParams(SolverParams):
    """Newton-type steps add the paper's line search (eq. 10) to the step-size rules."""

    line_search_beta: float = Field(0.5, gt=0, le=0.5, description="β of the line search, in (0, 1/2]")
    line_search_shrink: float = Field(0.5, gt=0, lt=1, description="factor between line-search candidates")
    line_search_candidates: int = Field(
        20, ge=1, le=60, description="candidates α*, α*·shrink, …; the smallest if none is accepted"
    )


@dataclass
class Direction:
    """One local step's direction for every client, and what the step-size rule may read.

    Attributes:
        direction: p [K, d]; the step is w − α·p.
        grads, hessians: the exact local gradients and Hessians (the line search reads them).
        error: Ñ = p − H⁻¹g, the noise in the Newton direction (zeros without noise); None when
            no line search needs it.
        metrics: per-step diagnostics, averaged over the local steps into the round's metrics.
    """

    direction: torch.Tensor
    grads: torch.Tensor | None = None
    hessians: torch.Tensor | None = None
    error: torch.Tensor | None = None
    metrics: dict[str, float] = field(default_factory=dict)


class LocalSolver(Algorithm):
    """Base of LocalNewton, GDP-LocalNewton and GDP-GD: subclasses implement `direction`.

    `releases_per_step` is how many noisy releases (each (1/σ)-GDP) one local step makes.
    """

    Params = SolverParams
    paper = PAPER
    neighbouring = "replace_one"  # noise scaled by the client's size s_k (mechanism.py)
    releases_per_step: ClassVar[int] = 0
    # binary ℓ2-regularised logistic regression: the objective and its Hessian are written for it
    models = frozenset({"logreg"})
    binary_labels = True

    # --- privacy plan ---------------------------------------------------------------------------

    def _releases(self, sigma: float) -> list[Event]:
        """Returns what one client releases in one round under noise multiplier σ."""
        count = self.releases_per_step * self.params.local_steps
        # noise_std scales with the client's size s_k: 2Γ/s_k covers replacing one record; under
        # add/remove the std itself would change with s_k (mechanism.py), so say so per event.
        return [GDPEvent(1.0 / sigma, neighbouring="replace_one")] * count

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = self._sigmas(noise_multiplier)
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            for s in participants(self.spec, r, self.noise_key):
                for event in self._releases(float(sigmas[s])):
                    ledger.record(r, silo_party(int(s)), event)
        return ledger

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> np.ndarray | None:
        """The paper's closed form: μ from (ε, δ) by the exact GDP conversion, split evenly over
        the most releases any client makes (2T when all take part): σ = √(2T)/μ."""
        if not self.private:
            return None
        taking_part = np.zeros(self.spec.dataset.silos, dtype=int)
        for r in range(1, self.spec.rounds + 1):
            taking_part[participants(self.spec, r, self.noise_key)] += 1
        releases = int(taking_part.max()) * self.releases_per_step * self.params.local_steps
        sigma = math.sqrt(releases) / gdp_mu(epsilon=epsilon, delta=delta)
        return np.asarray(sigma)  # one σ for every silo: each silo's μ is then at most the target

    def _sigmas(self, noise_multiplier: float | np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))

    # --- training -------------------------------------------------------------------------------

    def setup(self, noise_multiplier) -> None:
        if self.private and noise_multiplier is None:
            raise SpecError(
                "privacy", f"is required for {self.name}: give `mu`, `epsilon` or `noise_multiplier`."
            )
        self.sigmas = None if noise_multiplier is None else self._sigmas(noise_multiplier)
        self.clients = client_data(self.data, radius=self.params.feature_clip)
        self.w = torch.zeros(self.clients.dim, dtype=DTYPE)

    @abc.abstractmethod
    def direction(
        self, data: ClientData, w: torch.Tensor, clients: np.ndarray, r: int, step: int
    ) -> Direction:
        """Returns local step `step` (from 0) of round r for the listed clients at their models w [K, d]."""

    def step_sizes(self, data: ClientData, w: torch.Tensor, move: Direction, iteration: int) -> torch.Tensor:
        """Returns each client's step α [K] for global local iteration t = `iteration` (from 0)."""
        p = self.params
        if p.step == "fixed":
            return torch.full((len(w),), p.lr, dtype=w.dtype)
        if p.step == "decay":
            alpha = decayed_step(p.lr, rate=p.decay_rate, iteration=iteration, form=p.decay_form)
            return torch.full((len(w),), alpha, dtype=w.dtype)
        return line_search(
            data,
            w,
            move.direction,
            move.grads,
            move.hessians,
            move.error,
            ridge=p.ridge,
            max_step=p.lr,
            beta=p.line_search_beta,
            shrink=p.line_search_shrink,
            candidates=p.line_search_candidates,
        )

    def round(self, r: int) -> RoundOutput:
        p = self.params
        clients = participants(self.spec, r, self.noise_key)
        data = self.clients.take(clients)
        w = self.w.expand(len(clients), -1).clone()
        totals: dict[str, float] = {}
        for step in range(p.local_steps):
            move = self.direction(data, w, clients, r, step)
            alpha = self.step_sizes(data, w, move, (r - 1) * p.local_steps + step)
            w = w - alpha[:, None] * move.direction
            for key, value in {"step_size": float(alpha.mean()), **move.metrics}.items():
                totals[key] = totals.get(key, 0.0) + value / p.local_steps
        self.w = w.mean(0)  # the paper's server: the plain mean of the clients' models
        totals["objective"] = self.objective()
        releases = {}
        if self.private:
            releases = {silo_party(int(s)): self._releases(float(self.sigmas[s])) for s in clients}
        return RoundOutput(metrics=totals, releases=releases)

    def objective(self) -> float:
        """Returns f(w̄) = (1/n) Σ_j f_j(w̄): the ridge-regularised loss on all training records."""
        per_client = losses(self.clients, self.w.expand(len(self.clients.sizes), -1), ridge=self.params.ridge)
        return float((per_client * self.clients.sizes).sum() / self.clients.sizes.sum())

    @property
    def global_params(self) -> torch.Tensor:
        """The logreg model's parameters with logits (0, wᵀx): softmax over them is σ(wᵀx)."""
        flat = torch.zeros(self.layout.size)
        weight = next(v for v in self.layout.unflatten(flat).values() if v.dim() == 2)
        weight[1] = self.w.to(flat.dtype)
        return flat

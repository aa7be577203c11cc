"""Shuffle-DP minibatch SGD (SDP noisy prox-SGD without a regulariser; reference/000_isrl_dp.md §3.2).

As in the paper's SDP algorithms, every per-sample gradient is its own message: each silo
draws a minibatch of K records (without replacement), clips each record's gradient to C and
feeds it to an ε₀-LDP local randomizer; a trusted shuffler permutes all the round's messages
(Σ_i min(K, n_i) over the participating silos) and the server averages them and steps.

Randomizer: the ℓ2-ball mechanism of Duchi, Jordan & Wainwright (2018, JASA, §4.2.3), not
Cheu et al.'s binomial summation protocol, whose constants the note lacks (§3.2 "[NOT IN
TEXT]"). For ‖x‖ ≤ C: x̃ = ±C·x/‖x‖ with P(+) = 1/2 + ‖x‖/(2C); then Z is uniform on the
sphere of radius B on the half ⟨z, x̃⟩ > 0 with probability e^ε₀/(e^ε₀ + 1), else on the other
half. Every output's density is within e^ε₀ for any two inputs, so it is ε₀-LDP over the whole
ball, which Feldman, McMillan & Talwar's (2021) amplification needs. With c_d = E|U₁| =
Γ(d/2)/(√π Γ((d+1)/2)) for U uniform on the unit sphere and B = C (e^ε₀+1)/((e^ε₀−1) c_d),
E[Z] = x: the average is unbiased, at variance ≈ B² ≈ C²·πd/2·coth²(ε₀/2) per message.

Ledger: ShuffleEvent(ε₀, num_users = messages shuffled) per participating silo and round,
accounted with `dpfl.privacy.shuffle`'s numerical FMT bound (the `rdp` or `pld` accountant).
The bound is for substitution of one message (FMT's neighbouring relation); amplification by
the minibatch sampling is not claimed, so the ledger's ε is an upper bound.

Calibration: the runner's noise multiplier σ is read as σ = 1/ε₀ (larger σ, more privacy), so
`privacy.epsilon` calibrates ε₀ on the accountant; the paper gives no closed form.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpfl.algorithms.base import RoundOutput, participants, register_algorithm
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, silo_party
from dpfl.engine import gaussian_noise, per_sample_grads, silo_generator
from dpfl.engine.sampling import minibatches
from dpfl.privacy.events import Event, ShuffleEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["SDPMinibatchSGD", "l2_ball_randomizer_radius"]

_RANDOMIZER_STREAM = 2  # the randomizer's coins; the engine's streams 0 and 1 draw noise and batches


def l2_ball_randomizer_radius(*, clip: float, local_epsilon: float, dim: int) -> float:
    """Returns B of Duchi et al.'s ℓ2 mechanism: C (e^ε₀ + 1) / ((e^ε₀ − 1) c_d), in gradient units.

    c_d = Γ(d/2)/(√π Γ((d+1)/2)) is E|U₁| for U uniform on the unit sphere of R^d.
    """
    log_cd = math.lgamma(dim / 2) - math.lgamma((dim + 1) / 2) - 0.5 * math.log(math.pi)
    return clip / math.tanh(local_epsilon / 2) * math.exp(-log_cd)


@register_algorithm("sdp_mbsgd")
class SDPMinibatchSGD(ISRLMinibatchSGD):
    """Shuffle-DP minibatch SGD: per-record ε₀-LDP messages of clipped gradients, shuffled and averaged."""

    summary = "shuffle-DP minibatch SGD: ε0-LDP per-record messages, amplified by shuffling"

    def num_messages(self, silos: np.ndarray) -> int:
        """Returns how many messages the listed silos send together: Σ_i min(K, n_i)."""
        return int(np.minimum(self.params.batch_size, self.data.silo_sizes[silos]).sum())

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            for s, event in self.shuffle_events(participants(self.spec, r), sigmas).items():
                ledger.record(r, silo_party(s), event)
        return ledger

    def shuffle_events(self, silos: np.ndarray, sigma: np.ndarray) -> dict[int, Event]:
        """Returns each listed silo's release in a round: ShuffleEvent(1/σ_i, messages shuffled)."""
        n = self.num_messages(silos)
        return {int(s): ShuffleEvent(1.0 / float(sigma[s]), n) for s in silos}

    def paper_noise_multiplier(self, *, epsilon: float, delta: float) -> None:
        return None  # the SDP protocol's (g, b, p) are not in the paper's text (reference §3.2)

    def randomize(self, grads: torch.Tensor, mask: torch.Tensor, silos: np.ndarray, r: int) -> torch.Tensor:
        """Returns the ℓ2-mechanism messages of clipped per-sample gradients [S, B, P]; masked rows zero.

        Row (s, j) is drawn from silo s's own generators (its coins and its Gaussian stream), so a
        silo's messages do not depend on the other silos. Works in place on fresh [S, B, P] buffers.
        """
        clip, (_, b, d) = self.params.clip, grads.shape
        norms = torch.linalg.vector_norm(grads, dim=-1, keepdim=True)
        e = grads / norms.clamp(min=1e-30)  # the direction of x = clip_C(grad); ‖x‖ = min(‖grad‖, C)
        zero = norms[..., 0] == 0
        if zero.any():  # a zero gradient gets ± a fixed direction, equally likely: still unbiased
            e[zero] = torch.nn.functional.one_hot(torch.tensor(0), d).to(e.dtype)
        coins = torch.stack(
            [
                torch.rand(b, 2, generator=silo_generator(self.spec.seed, int(k), r, _RANDOMIZER_STREAM))
                for k in silos
            ]
        ).to(grads.dtype)
        e.mul_(torch.where(coins[..., :1] < 0.5 + norms.clamp(max=clip) / (2 * clip), 1.0, -1.0))  # x̃ = ±C e
        eps0 = torch.as_tensor(1.0 / self.sigmas[silos], dtype=grads.dtype)[:, None, None]
        keep_side = coins[..., 1:] < torch.sigmoid(eps0)  # e^ε₀/(e^ε₀ + 1)
        z = gaussian_noise((b, d), 1.0, seed=self.spec.seed, silos=silos, round=r, dtype=grads.dtype)
        z.div_(torch.linalg.vector_norm(z, dim=-1, keepdim=True))  # uniform on the unit sphere
        dot = torch.einsum("sbp,sbp->sb", z, e).unsqueeze(-1)
        z.addcmul_(e, -2 * dot * ((dot > 0) != keep_side))  # reflect into the chosen half: still uniform
        radius = torch.as_tensor(
            [
                l2_ball_randomizer_radius(clip=clip, local_epsilon=float(1 / self.sigmas[k]), dim=d)
                for k in silos
            ],
            dtype=grads.dtype,
        )
        return z.mul_(radius[:, None, None] * mask[..., None])

    def round(self, r: int) -> RoundOutput:
        p, spec = self.params, self.spec
        silos = participants(spec, r)
        (batch,) = minibatches(
            self.data.x_train,
            self.data.y_train,
            self.data.silos,
            silos=silos,
            batch_size=p.batch_size,
            steps=1,
            seed=spec.seed,
            round=r,
        )
        grads = per_sample_grads(self.model, self.layout, self.w, batch)
        messages = self.randomize(grads, batch.mask, silos, r)
        self.w = self.step(self.w, messages.sum((0, 1)) / self.num_messages(silos))
        norms = torch.linalg.vector_norm(grads, dim=-1)
        events = self.shuffle_events(silos, self.sigmas)
        return RoundOutput(
            metrics=self.batch_metrics(batch, norms) | {"local_epsilon": float(1 / self.sigmas[silos].min())},
            releases={silo_party(s): [e] for s, e in events.items()},
        )

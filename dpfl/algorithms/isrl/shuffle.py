"""Shuffle-DP minibatch SGD (SDP noisy prox-SGD without a regulariser; reference/000_isrl_dp.md §3.2).

As in the paper's SDP algorithms, every per-sample gradient is its own message: each silo
draws a minibatch of K records (without replacement), clips each record's gradient to C and
feeds it to a local randomizer; a trusted shuffler permutes all the round's messages
(n = Σ_i min(K, n_i) over the participating silos) and the server averages them and steps.
Two randomizers (`params.randomizer`):

`l2_ball` (default): the ℓ2-ball mechanism of Duchi, Jordan & Wainwright (2018, JASA,
§4.2.3). For ‖x‖ ≤ C: x̃ = ±C·x/‖x‖ with P(+) = 1/2 + ‖x‖/(2C); then Z is uniform on the
sphere of radius B on the half ⟨z, x̃⟩ > 0 with probability e^ε₀/(e^ε₀ + 1), else on the other
half. Every output's density is within e^ε₀ for any two inputs, so it is ε₀-LDP over the whole
ball, which Feldman, McMillan & Talwar's (2021) amplification needs. With c_d = E|U₁| =
Γ(d/2)/(√π Γ((d+1)/2)) for U uniform on the unit sphere and B = C (e^ε₀+1)/((e^ε₀−1) c_d),
E[Z] = x: the average is unbiased, at variance ≈ B² ≈ C²·πd/2·coth²(ε₀/2) per message.
Ledger: ShuffleEvent(ε₀, num_users = n) per participating silo and round, accounted with
`dpfl.privacy.shuffle`'s numerical FMT bound under every accountant (`rdp` or `pld`).

`binomial`: Cheu, Joseph, Mao & Peng's (2021) vector summation protocol P_vec, the one the
paper names (`dpfl.algorithms.isrl.vector_sum`): randomised rounding of each coordinate to
granularity 1/g plus b Bernoulli(1/4) bits per coordinate and message; the shuffler reveals
the count of ones per coordinate and the server debiases it into an unbiased sum. Its theorem
makes each round (ε′, δ′)-DP with (g, b) set from (ε′, δ′, n, d); the ledger records
ApproxDPEvent(ε′, δ′) per participating silo and round, which only the `pld` accountant
composes. The theorem needs ε′ ≤ 15. Its constants make the noise large: the estimate of the
mean has standard deviation ≈ 424·C·ln(4d/δ′)/(ε′ n) per coordinate, so it learns only with
many messages per round and a large ε′ (MNIST, PCA 50, logistic regression, 25 silos sending
all 60,000 records each round, ε′ = 15: test accuracy 0.19, 0.42, 0.56 after rounds 1–3, for a
run ε of 45 at δ = 1e-5).

Both bounds are for substitution of one message (the neighbouring relation of FMT and of Cheu
et al.); amplification by the minibatch sampling is not claimed, so the ledger's ε is an
upper bound.

Calibration: the runner's noise multiplier σ is read as σ = 1/ε₀ for `l2_ball` and σ = 1/ε′,
the per-round ε′ of the shuffled sum, for `binomial` (larger σ, more privacy), whose per-round
δ′ is δ/(2R) for the run's δ and R rounds, so that R rounds spend at most δ/2 of δ on the
theorem's failure probabilities. `privacy.epsilon` calibrates σ on the accountant; the paper
gives no closed form. Shuffling amplifies a message only among messages from the same
randomizer, so every silo uses one σ.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants, silo_party
from dpfl.algorithms.isrl import vector_sum
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, MBSGDParams
from dpfl.engine import gaussian_noise, per_sample_grads, silo_generator
from dpfl.engine.noise import on_default_device
from dpfl.engine.sampling import float32_rate_below, minibatches
from dpfl.errors import SpecError
from dpfl.privacy.accountants import make_accountant, registered_accountants
from dpfl.privacy.calibration import NoiseOutOfRange
from dpfl.privacy.events import ApproxDPEvent, Event, ShuffleEvent
from dpfl.privacy.ledger import Ledger

__all__ = ["SDPMinibatchSGD", "SDPParams", "l2_ball_randomizer_radius"]

_RANDOMIZER_STREAM = 2  # the randomizer's coins; the engine's streams 0 and 1 draw noise and batches


def l2_ball_randomizer_radius(*, clip: float, local_epsilon: float, dim: int) -> float:
    """Returns B of Duchi et al.'s ℓ2 mechanism: C (e^ε₀ + 1) / ((e^ε₀ − 1) c_d), in gradient units.

    c_d = Γ(d/2)/(√π Γ((d+1)/2)) is E|U₁| for U uniform on the unit sphere of R^d.
    """
    log_cd = math.lgamma(dim / 2) - math.lgamma((dim + 1) / 2) - 0.5 * math.log(math.pi)
    return clip / math.tanh(local_epsilon / 2) * math.exp(-log_cd)


class SDPParams(MBSGDParams):
    randomizer: Literal["l2_ball", "binomial"] = Field(
        "l2_ball",
        description="local randomizer: Duchi et al.'s ε0-LDP l2-ball mechanism (shuffle amplification "
        "bound, any accountant) or Cheu et al.'s binomial vector sum (per-round (ε, δ); accountant pld)",
    )


@ALGORITHMS.register("sdp_mbsgd")
class SDPMinibatchSGD(ISRLMinibatchSGD):
    """Shuffle-DP minibatch SGD: each record's clipped gradient randomized, shuffled and averaged."""

    batched = False  # its own `round`: runs of it train one by one

    Params = SDPParams
    summary = "shuffle-DP minibatch SGD: per-record randomized messages, amplified by shuffling"
    private_metrics = frozenset({"round_epsilon", "local_epsilon", "noise_bits"})  # functions of σ, sizes
    trusted = "a trusted shuffler permutes the round's messages before the server sees them (simulated here)"
    party_of_silo = None  # shuffling amplifies among messages of one randomizer: one σ for all silos

    def __init__(self, spec, data, model):
        super().__init__(spec, data, model)
        privacy = spec.privacy
        if self.params.randomizer == "binomial" and privacy is not None:
            probe = ApproxDPEvent(1.0, 1e-9)
            able = [name for name in registered_accountants() if make_accountant(name).supports(probe)]
            if privacy.accountant not in able:
                raise SpecError(
                    "privacy.accountant",
                    f"must be one of {', '.join(able)} for `params.randomizer: binomial` (Cheu et al.'s "
                    f"theorem gives each round an (ε, δ) pair, which only these compose); "
                    f"got {privacy.accountant!r}.",
                )

    def round_delta(self) -> float:
        """Returns δ′ = δ/(2R) of each round of the binomial protocol (R rounds spend ≤ δ/2 on it)."""
        return self.spec.privacy.delta / (2 * self.spec.rounds)

    def vector_sum_parameters(self, silos: np.ndarray, sigma: float) -> vector_sum.VectorSumParameters:
        """Returns P_vec's (g, b, p) for a round of the listed silos under σ = 1/ε′.

        Raises:
            NoiseOutOfRange: ε′ = 1/σ is beyond the theorem's range (ε′ ≤ 15).
        """
        epsilon = 1.0 / float(sigma)
        if epsilon > vector_sum.MAX_EPSILON:
            raise NoiseOutOfRange(
                "privacy.noise_multiplier",
                f"must be ≥ {1 / vector_sum.MAX_EPSILON:.4g} for `params.randomizer: binomial` (a round's "
                f"ε′ = 1/σ ≤ {vector_sum.MAX_EPSILON:g}, Cheu et al.'s theorem); got {float(sigma):.4g}.",
            )
        return vector_sum.vector_sum_parameters(
            epsilon=epsilon,
            delta=self.round_delta(),
            num_users=self.num_messages(silos),
            dim=self.layout.size,
            bound=self.params.clip,
        )

    def num_messages(self, silos: np.ndarray) -> int:
        """Returns how many messages the listed silos send together: Σ_i min(K, n_i)."""
        return int(np.minimum(self.params.batch_size, self.data.silo_sizes[silos]).sum())

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            for s, event in self.shuffle_events(participants(self.spec, r, self.noise_key), sigmas).items():
                ledger.record(r, silo_party(s), event)
        return ledger

    def shuffle_events(self, silos: np.ndarray, sigma: np.ndarray) -> dict[int, Event]:
        """Returns each listed silo's release in a round.

        `l2_ball`: ShuffleEvent(1/σ_i, messages shuffled); `binomial`: ApproxDPEvent(ε′ = 1/σ,
        δ′) of the theorem, for the round's messages (checked against its range).
        """
        if self.params.randomizer == "binomial":
            self.vector_sum_parameters(silos, float(sigma[silos].max()))  # refuses an ε′ out of range
            return {int(s): ApproxDPEvent(1.0 / float(sigma[s]), self.round_delta()) for s in silos}
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
        coins = on_default_device(
            torch.stack(
                [
                    torch.rand(
                        b,
                        2,
                        generator=silo_generator(self.noise_key, int(k), r, _RANDOMIZER_STREAM),
                        device="cpu",
                    )
                    for k in silos
                ]
            )
        ).to(grads.dtype)
        e.mul_(torch.where(coins[..., :1] < 0.5 + norms.clamp(max=clip) / (2 * clip), 1.0, -1.0))  # x̃ = ±C e
        # x̃'s side is kept with probability e^ε₀/(e^ε₀ + 1) at most, as the ε₀-LDP bound needs
        keep = float32_rate_below(1.0 / (1.0 + np.exp(-1.0 / self.sigmas[silos])))
        keep_side = coins[..., 1:] < torch.as_tensor(keep, dtype=grads.dtype)[:, None, None]
        z = gaussian_noise((b, d), 1.0, seed=self.noise_key, silos=silos, round=r, dtype=grads.dtype)
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

    def binomial_messages(
        self, grads: torch.Tensor, mask: torch.Tensor, silos: np.ndarray, r: int
    ) -> tuple[torch.Tensor, vector_sum.VectorSumParameters]:
        """Returns R_vec's messages of the clipped per-sample gradients [S, B, P] and the round's (g, b, p).

        Row (s, j) is drawn from silo s's own generator, so a silo's messages do not depend on
        the other silos; masked rows send nothing.
        """
        params = self.vector_sum_parameters(silos, float(self.sigmas[silos].max()))
        norms = torch.linalg.vector_norm(grads, dim=-1, keepdim=True)
        clipped = grads * (self.params.clip / norms.clamp(min=self.params.clip))
        generators = [silo_generator(self.noise_key, int(s), r, _RANDOMIZER_STREAM) for s in silos]
        return vector_sum.randomize(clipped, mask, params, generators), params

    def round(self, r: int) -> RoundOutput:
        p = self.params
        silos = participants(self.spec, r, self.noise_key)
        (batch,) = minibatches(
            self.data.x_train,
            self.data.y_train,
            self.data.silos,
            silos=silos,
            batch_size=p.batch_size,
            steps=1,
            seed=self.noise_key,
            round=r,
        )
        grads = per_sample_grads(self.model, self.layout, self.w, batch)
        n = self.num_messages(silos)
        if p.randomizer == "binomial":
            counts, params = self.binomial_messages(grads, batch.mask, silos, r)
            mean = (vector_sum.analyze(counts.sum((0, 1)), params) / n).to(self.w.dtype)
            extra = {"round_epsilon": float(1 / self.sigmas[silos].max()), "noise_bits": float(params.b)}
        else:
            mean = self.randomize(grads, batch.mask, silos, r).sum((0, 1)) / n
            extra = {"local_epsilon": float(1 / self.sigmas[silos].min())}
        self.w = self.step(self.w, mean)
        norms = torch.linalg.vector_norm(grads, dim=-1)
        events = self.shuffle_events(silos, self.sigmas)
        return RoundOutput(
            metrics=self.batch_metrics(batch, norms) | extra,
            releases={silo_party(s): [e] for s, e in events.items()},
        )

"""Black-box trials: the algorithm's real release path, end to end, tested against its ledger.

The first-round audit (`dpfl.audit.rounds`) reads each release's pre-noise value and the noise
std the code reports, and draws the noise itself. It cannot see noise the code scales after
drawing it, noise drawn around the release tap, sampling at another rate than the ledger's,
noise repeated across rounds or keyed by a public seed, clipping that stops after round 1, or a
ledger that skips rounds. These trials observe only what the run publishes: the server's model
after every round of a short run (`Algorithm.global_params`), over many independent runs on the
fuzzer's worst neighbours D and D′, each drawing every mechanism (participation, sampling,
noise) from a fresh secret key, as a protected run does. Nothing is read from the tap.

Each trial's model trajectory is reduced to scalar statistics, each the score of one test:

- `composed`: Σ_r ⟨Δw_r − Δw̄′_r, u⟩, with Δw̄ and Δw̄′ the rounds' model moves of one noiseless
  run on D and on D′ (every sampling rate 1), and u the unit direction between them in round 1,
  where both start from the same model and only the unit differs: the likelihood-ratio test of
  the claimed mechanism (independent Gaussian noise each round) while the unit's pull keeps
  its direction;
- `repeat` (two rounds or more): how much more the round-to-round change of the residual
  Δw_r − Δw̄_r moves under one side's noiseless run than under the other's. Fresh noise each
  round makes it noisy; noise repeated across rounds cancels in it and leaves the data's
  noiseless move, as a run that draws the same noise every round would publish it;
- `replay` (two rounds or more): the same, with each round's residual taken against the round
  replayed without noise from the state the trial published (the model, and any tensor state),
  on D and on D′: the adversary's own computation. Under the true hypothesis a noise repeated
  across rounds cancels exactly, leaving the other hypothesis's difference alone.

For each statistic, half of the trials choose a threshold test, the other half bound its rates
by Clopper–Pearson (`statistics`), family-wise over statistics and seeds (Bonferroni). The
bound is then held against the ledger's whole privacy profile, not one (ε, δ) point: the
party's events over the trial rounds claim, for every ε ≥ 0, TPR ≤ e^ε·FPR + δ(ε) (δ(ε) from
dp-accounting's privacy loss distribution of those events). A test above that curve for some ε
is a proof, at the stated confidence, that the code releases more than its ledger accounts. A
thousand trials cannot reach the tail a single point at δ = 10⁻⁵ lives in, but the profile is
also a claim at FPR 5 %, where they can (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski,
Carlini & Terzis 2023, "Tight auditing of differentially private machine learning", §4: the
trade-off curve as the claim under audit).

Power is lost where other parties' noise reaches the model too: a silo audited through a model
that averages several silos' releases sees their noise as well. The planted-bug suite
(benchmarks/audit_bugs.py) uses one silo where the party is a silo.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dpfl.algorithms import Algorithm
from dpfl.algorithms.base import EVERY_SILO
from dpfl.audit.fuzz import fixed_sample_spec
from dpfl.audit.neighbours import Neighbours
from dpfl.audit.statistics import clopper_pearson
from dpfl.engine.release import tap
from dpfl.errors import SpecError, UnsupportedEventError
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.calibration import epsilon
from dpfl.privacy.events import ComposedEvent, Event

__all__ = ["BlackBoxAudit", "Profile", "black_box", "statistics_of"]

STATISTICS = ("composed", "repeat", "replay")
_EPSILON_GRID = np.concatenate([np.linspace(0.0, 4.0, 81), np.linspace(4.1, 40.0, 360)])
_CHUNK = 64  # trials set up and stepped together (`Algorithm.round_many`)


@dataclass(frozen=True)
class Profile:
    """A ledger's privacy profile, δ(ε) on a grid of ε, and its ε at the run's δ."""

    epsilons: np.ndarray
    deltas: np.ndarray
    epsilon: float  # at the run's δ

    @classmethod
    def of(cls, events: Sequence[Event], *, delta: float, accountant: str) -> Profile:
        """Returns the profile of `events` composed: dp-accounting's PLD where it accounts them
        (the tight curve), else the single point the run's accountant gives (δ(ε) = 1 below it)."""
        total = ComposedEvent(tuple(events))
        eps = float(epsilon(total, delta=delta, accountant=accountant))
        try:
            pld = make_accountant("pld")
            pld.compose(total)
            deltas = np.asarray(pld.pld.get_delta_for_epsilon(_EPSILON_GRID), dtype=float)
            eps = min(eps, float(pld.epsilon(delta)))
        except (UnsupportedEventError, ValueError):
            deltas = np.where(eps <= _EPSILON_GRID, delta, 1.0)
        return cls(_EPSILON_GRID, np.clip(deltas, 0.0, 1.0), eps)

    def excess(self, tpr_low: float, fpr_high: float) -> float:
        """Returns max over ε of log((TPR − δ(ε)) / FPR) − ε: > 0 when a test with these rates
        beats the profile (a violation), −∞ when TPR is below every δ(ε)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.log(np.clip(tpr_low - self.deltas, 0.0, None) / max(fpr_high, 1e-300)) - self.epsilons
        return float(np.max(np.where(tpr_low > self.deltas, gain, -np.inf)))


@dataclass(frozen=True)
class BlackBoxAudit:
    """The black-box audit of one party over a short run: the best test and the claim it faced.

    Attributes:
        excess: max over ε of log((TPR_lo − δ(ε))/FPR_hi) − ε, at the family-wise confidence;
            > 0 proves the ledger's profile is beaten.
        epsilon_lower: the test's ε lower bound at the run's δ (log((TPR_lo − δ)/FPR_hi)).
        epsilon_ledger: the ledger's ε of the party's releases over `rounds`, at the run's δ.
    """

    release: str
    neighbours: str
    rounds: int
    trials: int
    seeds: int
    statistic: str
    tpr_low: float
    fpr_high: float
    excess: float
    epsilon_lower: float
    epsilon_ledger: float
    confidence: float = 0.99

    @property
    def verdict(self) -> str:
        """Returns "violation" when a test beat the ledger's profile, else "no violation found"."""
        return "violation" if self.excess > 0 else "no violation found"

    def to_json(self) -> dict[str, Any]:
        """Returns the audit as a JSON-ready dict (−∞ as None)."""
        out = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in vars(self).items()}
        return out | {"kind": "black-box", "verdict": self.verdict}


def black_box(
    algorithm: Algorithm,
    noise_multiplier: float | np.ndarray,
    pair: Neighbours,
    *,
    delta: float,
    accountant: str,
    rounds: int = 2,
    trials: int = 2_000,
    seed: int = 0,
    seeds: int = 1,
    confidence: float = 0.99,
) -> BlackBoxAudit:
    """Returns the black-box audit of the releases over `rounds` rounds of the party whose data
    `pair` changes (the round's only party, or the changed silo's).

    Args:
        algorithm: a prepared algorithm; its spec, data and model are copied, never changed.
        noise_multiplier: σ as `setup` takes it.
        pair: the neighbours (e.g. the fuzzer's worst).
        trials: runs per side and seed (half choose each test, half bound it).
        seed: the first seed of the trials' secret keys; `seeds` consecutive ones are run.
        confidence: family-wise, over the statistics and seeds.
    """
    if trials < 8:
        raise SpecError("trials", f"must be ≥ 8 (half choose the test, half bound it); got {trials}.")
    rounds = max(1, min(rounds, algorithm.spec.rounds))
    # The directions come from noiseless runs with every sampling rate 1: then the two sides
    # differ in the unit alone (at another rate, the silo's size moves every record's draw).
    spec, data = algorithm.spec, algorithm.data
    fixed = type(algorithm)(fixed_sample_spec(spec, data), data, algorithm.model)
    ref_d, ref_dp = (
        next(_moves(fixed, data, noise_multiplier, rounds, [spec.seed], pair.start, noise=False))[0][0]
        for data in (pair.d, pair.d_prime)
    )
    party, events = _party_events(algorithm, pair, noise_multiplier, rounds)
    profile = Profile.of(events, delta=delta, accountant=accountant)
    names = STATISTICS if rounds > 1 else STATISTICS[:1]
    replay = (pair.d, pair.d_prime) if rounds > 1 else ()
    alpha = (1 - confidence) / (len(names) * seeds) / 2  # Bonferroni; halves for TPR and FPR
    best: tuple[float, str, float, float, float] = (-math.inf, names[0], 0.0, 1.0, 0.0)
    for k in range(seed, seed + seeds):
        keys = np.random.default_rng([k, 0xB1AC]).integers(0, 2**62, size=2 * trials)
        on_d, on_dp = (
            _statistics(
                _moves(algorithm, data, noise_multiplier, rounds, side, pair.start, replay=replay),
                ref_d,
                ref_dp,
            )
            for data, side in ((pair.d, keys[:trials]), (pair.d_prime, keys[trials:]))
        )
        for name in names:
            tpr_low, fpr_high = _best_test(on_d[name], on_dp[name], profile, alpha)
            excess = profile.excess(tpr_low, fpr_high)
            if excess > best[0]:
                lower = math.log(max(tpr_low - delta, 1e-300) / fpr_high) if tpr_low > delta else 0.0
                best = (excess, name, tpr_low, fpr_high, max(lower, 0.0))
    excess, name, tpr_low, fpr_high, lower = best
    return BlackBoxAudit(
        release=party,
        neighbours=pair.name,
        rounds=rounds,
        trials=trials,
        seeds=seeds,
        statistic=name,
        tpr_low=tpr_low,
        fpr_high=fpr_high,
        excess=excess,
        epsilon_lower=lower,
        epsilon_ledger=profile.epsilon,
        confidence=confidence,
    )


def statistics_of(
    moves: np.ndarray, ref_d: np.ndarray, ref_dp: np.ndarray, replayed: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Returns each statistic of trials ([T, R, P] model moves), from the noiseless runs' moves
    `ref_d`, `ref_dp` [R, P] on D and D′ and each trial's rounds replayed on D and D′ [T, R, 2, P]
    (see the module docstring), one value per trial."""
    gap = ref_d - ref_dp
    norms = np.linalg.norm(gap, axis=1, keepdims=True)
    u = np.divide(gap, norms, out=np.zeros_like(gap), where=norms > 0)
    out = {"composed": np.einsum("trp,p->t", moves - ref_dp, u[0])}
    if moves.shape[1] > 1:
        # an orthonormal basis of the rounds' gap directions: the repeat test looks only there,
        # where the model's drift under the other records' gradients is smallest
        basis = np.linalg.qr(u.T)[0][:, norms[:, 0] > 0]
        change = {h: np.diff(moves - ref, axis=1) @ basis for h, ref in (("d", ref_d), ("dp", ref_dp))}
        out["repeat"] = np.square(change["dp"]).sum((1, 2)) - np.square(change["d"]).sum((1, 2))
        if replayed is not None:
            residual = np.diff(moves[:, :, None] - replayed, axis=1)  # [T, R − 1, 2, P]
            out["replay"] = np.square(residual[:, :, 1]).sum((1, 2)) - np.square(residual[:, :, 0]).sum(
                (1, 2)
            )
    return out


def _best_test(s_d: np.ndarray, s_dp: np.ndarray, profile: Profile, alpha: float) -> tuple[float, float]:
    """Returns (TPR_lo, FPR_hi) of the threshold test the first half of the trials chose (largest
    excess over the profile), bounded on the second half at level α each."""
    half_d, half_dp = len(s_d) // 2, len(s_dp) // 2
    best = (-math.inf, 0.0, 1, "D")
    for positive in ("D", "D′"):
        pos, neg = (s_d, s_dp) if positive == "D" else (s_dp, s_d)
        cut_p, cut_n = (half_d, half_dp) if positive == "D" else (half_dp, half_d)
        for sign in (1, -1):
            p, n = sign * pos[:cut_p], sign * neg[:cut_n]
            for t in np.unique(np.quantile(n, np.linspace(0.5, 1.0, 60))):
                t = float(np.nextafter(t, np.inf))
                tp, fp = np.count_nonzero(p >= t), np.count_nonzero(n >= t)
                tpr_low, _ = clopper_pearson(np.array([tp]), len(p), alpha=alpha)
                _, fpr_high = clopper_pearson(np.array([fp]), len(n), alpha=alpha)
                excess = profile.excess(float(tpr_low[0]), float(fpr_high[0]))
                if excess > best[0]:
                    best = (excess, t, sign, positive)
    _, t, sign, positive = best
    pos, neg = (s_d[half_d:], s_dp[half_dp:]) if positive == "D" else (s_dp[half_dp:], s_d[half_d:])
    tp, fp = np.count_nonzero(sign * pos >= t), np.count_nonzero(sign * neg >= t)
    tpr_low, _ = clopper_pearson(np.array([tp]), len(pos), alpha=alpha)
    _, fpr_high = clopper_pearson(np.array([fp]), len(neg), alpha=alpha)
    return float(tpr_low[0]), float(fpr_high[0])


def _runs(
    algorithm: Algorithm, data, noise_multiplier, keys: Sequence[int], start: torch.Tensor | None = None
) -> list[Algorithm]:
    """Returns one set-up run of `algorithm` on `data` per noise key, from `start` if given (the
    pair's model, `Neighbours.start`)."""
    out = []
    for key in keys:
        run = type(algorithm)(algorithm.spec, data, copy.deepcopy(algorithm.model))
        run.noise_key = int(key)
        run.setup(noise_multiplier)
        if start is not None:
            run.w = start.to(run.w.dtype).clone()
        out.append(run)
    return out


def _moves(
    algorithm: Algorithm,
    data,
    noise_multiplier,
    rounds: int,
    keys: Sequence[int],
    start: torch.Tensor | None = None,
    *,
    noise: bool = True,
    replay: Sequence = (),
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yields, per chunk of runs (one per key) on `data`, the model's move in every round, float64
    [chunk, R, P], and each round replayed without noise from the run's state on each dataset of
    `replay` [chunk, R, len(replay), P]. A chunk is reduced before the next is run: P may be large.

    A replay is a fresh run on the hypothesis's data under the spec's public seed, given the
    trial's state (its tensors and floats, never its key) before the round: what an adversary who
    saw the published model can compute under each hypothesis."""
    for first in range(0, len(keys), _CHUNK):
        runs = _runs(algorithm, data, noise_multiplier, keys[first : first + _CHUNK], start)
        public = [algorithm.spec.seed] * len(runs)
        hypotheses = [_runs(algorithm, other, noise_multiplier, public, start) for other in replay]
        size = runs[0].global_params.numel()
        moves = np.empty((len(runs), rounds, size))
        replayed = np.empty((len(runs), rounds, len(replay), size))
        before = torch.stack([run.global_params.detach().double() for run in runs])
        for r in range(1, rounds + 1):
            for j, hypothesis in enumerate(hypotheses):
                for run, hyp in zip(runs, hypothesis, strict=True):
                    _transplant(run, hyp)
                with tap(noise=False):
                    type(algorithm).round_many(hypothesis, r)
                replayed[:, r - 1, j] = (
                    torch.stack([h.global_params.double() for h in hypothesis]) - before
                ).numpy()
            if noise:
                type(algorithm).round_many(runs, r)
            else:
                with tap(noise=False):
                    type(algorithm).round_many(runs, r)
            after = torch.stack([run.global_params.detach().double() for run in runs])
            moves[:, r - 1] = (after - before).numpy()
            before = after
        yield moves, replayed


def _transplant(run: Algorithm, hypothesis: Algorithm) -> None:
    """Gives `hypothesis` the state of `run`: every tensor and float attribute both hold alike
    (the model, SPIDER's estimate, an adaptive clip), never the key or the data."""
    mine = vars(hypothesis)
    for name, value in vars(run).items():
        other = mine.get(name)
        if isinstance(value, torch.Tensor) and isinstance(other, torch.Tensor) and other.shape == value.shape:
            setattr(hypothesis, name, value.detach().clone())
        elif isinstance(value, float) and isinstance(other, float):
            setattr(hypothesis, name, value)


def _statistics(
    chunks: Iterator[tuple[np.ndarray, np.ndarray]], ref_d: np.ndarray, ref_dp: np.ndarray
) -> dict[str, np.ndarray]:
    """Returns `statistics_of` every chunk of trials, concatenated."""
    parts = [
        statistics_of(moves, ref_d, ref_dp, replayed if replayed.shape[2] else None)
        for moves, replayed in chunks
    ]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def _party_events(
    algorithm: Algorithm, pair: Neighbours, noise_multiplier, rounds: int
) -> tuple[str, list[Event]]:
    """Returns the party whose data `pair` changes and its ledger events over `rounds` rounds on D:
    what a run records, or where silos are drawn to take part, the plan with every silo taking
    part (`EVERY_SILO`), which bounds every draw's."""
    (run,) = _runs(algorithm, pair.d, noise_multiplier, [algorithm.spec.seed], pair.start)
    by_party: dict[str, list[Event]] = {}
    if algorithm.spec.silos_per_round < algorithm.spec.dataset.silos:
        run.noise_key = EVERY_SILO
        for entry in run.plan(noise_multiplier).entries:
            if entry.round <= rounds:
                by_party.setdefault(entry.party, []).append(entry.event)
    else:
        with tap(noise=False):
            for r in range(1, rounds + 1):
                for name, events in run.round(r).releases.items():
                    by_party.setdefault(name, []).extend(events)
    changed = [f"silo-{i}" for i in _changed_silos(pair)]
    if len(by_party) == 1:
        return next(iter(by_party.items()))
    found = [p for p in changed if p in by_party]
    if len(found) != 1:
        raise ValueError(f"cannot tell which party {pair.name!r} changes; parties: {sorted(by_party)}")
    return found[0], by_party[found[0]]


def _changed_silos(pair: Neighbours) -> list[int]:
    """Returns the silos whose records differ between D and D′ (by content, not index)."""
    d, dp = pair.d, pair.d_prime

    def records(data, i):
        return data.x_train[data.silos[i]], data.y_train[data.silos[i]]

    out = []
    for i in range(max(len(d.silos), len(dp.silos))):
        if i >= min(len(d.silos), len(dp.silos)):
            out.append(i)
            continue
        (x, y), (x2, y2) = records(d, i), records(dp, i)
        if x.shape != x2.shape or not (torch.equal(x, x2) and torch.equal(y, y2)):
            out.append(i)
    return out

"""What the ISRL-DP paper's closed-form σ spends in the paper's own MNIST setting.

The paper (seed 000, reference §4.2 and §6.2) calibrates every message with the moments
accountant's closed form σ = q·√(8R ln(2/δ))/ε (noise multiplier on a silo's clipped sum),
with n = 1238 records per silo, δ = 1/n² and a batch K = ⌊n√24/(2√R)⌋, chosen so that q²R ≈ 6
stays inside the condition ε < c₁q²R under which that form is meant to hold. Our reproduction's
own table applies the same form at our batch size (q²R ≈ 0.14), far outside it; this module
accounts it where the paper used it, for both neighbouring relations:

- *add/remove one record*, our accountants' relation: the `rdp` accountant (the ledger's headline);
- *replace one record*, the paper's own relation (its sensitivities are 2L/K): dp-accounting's
  PLD with `REPLACE_ONE`, whose dominating pair puts the two records at ±C along one direction.

Alg. 11 (the alternate Fed-SPIDER) sends 2R − 1 messages (a fresh gradient at every phase
start and a difference every other step, R rounds of two messages but the first), each at the
same noise-to-sensitivity ratio as MB-SGD's (the difference carries twice the noise for twice
the sensitivity), while its σ is calibrated for R. Nothing here trains or loads data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dpfl.privacy import dpa
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent

__all__ = ["PAPER_RECORDS", "STATED", "Row", "batch_size", "markdown", "noise_multiplier", "rows"]

PAPER_RECORDS = 1238  # training records per silo (reference §6.2)
STATED = (0.75, 1.0, 1.5, 3.0, 6.0, 12.0, 18.0)  # the paper's ε per silo
_PLD_INTERVAL = 1e-4  # dp-accounting's default discretisation, pessimistic rounding


@dataclass(frozen=True)
class Row:
    """One method under one neighbouring relation: the ε its paper σ spends at each stated ε."""

    method: str
    rounds: int
    releases: int
    relation: str  # "add/remove" or "replace-one"
    accountant: str
    spent: tuple[float, ...]  # one per stated ε


def batch_size(rounds: int, n: int = PAPER_RECORDS) -> int:
    """Returns the paper's K = ⌊n√24/(2√R)⌋ (606 for R = 25, 428 for R = 50)."""
    return math.floor(n * math.sqrt(24) / (2 * math.sqrt(rounds)))


def noise_multiplier(epsilon: float, rounds: int, n: int = PAPER_RECORDS) -> float:
    """Returns the paper's σ on a silo's clipped sum for a stated ε: q·√(8R ln(2/δ))/ε, δ = 1/n²."""
    q = batch_size(rounds, n) / n
    return q * math.sqrt(8 * rounds * math.log(2 * n**2)) / epsilon


def _add_remove(q: float, sigma: float, releases: int, delta: float) -> float:
    accountant = make_accountant("rdp")
    accountant.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), releases))
    return accountant.epsilon(delta)


def _replace_one(q: float, sigma: float, releases: int, delta: float) -> float:
    # Each record's clipped contribution has norm ≤ C; replacing one moves the sum by up to 2C,
    # which dp-accounting's REPLACE_ONE pair models as the two records at ±C (sensitivity C).
    pld = dpa.pld().privacy_loss_distribution.from_gaussian_mechanism(
        sigma,
        sensitivity=1.0,
        sampling_prob=q,
        value_discretization_interval=_PLD_INTERVAL,
        neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE,
    )
    return pld.self_compose(releases).get_epsilon_for_delta(delta)


def rows(rounds: int, stated: Sequence[float] = STATED, n: int = PAPER_RECORDS) -> list[Row]:
    """Returns MB-SGD's (R releases) and Alg. 11's (2R − 1) ε at each stated ε, per relation."""
    q, delta = batch_size(rounds, n) / n, 1 / n**2
    out = []
    for method, releases in (("ISRL-DP MB-SGD", rounds), ("Fed-SPIDER, Alg. 11", 2 * rounds - 1)):
        for relation, accountant, spend in (
            ("add/remove", "rdp", _add_remove),
            ("replace-one", "pld", _replace_one),
        ):
            spent = tuple(spend(q, noise_multiplier(e, rounds, n), releases, delta) for e in stated)
            out.append(Row(method, rounds, releases, relation, accountant, spent))
    return out


def markdown(table: Sequence[Row], stated: Sequence[float] = STATED) -> str:
    """Returns the rows as a Markdown table; **bold** where the spent ε exceeds the stated one."""
    head = "| method | R | messages | neighbours | accountant | " + " | ".join(f"ε = {e:g}" for e in stated)
    lines = [head + " |", "|---|---:|---:|---|---|" + "---:|" * len(stated)]
    for row in table:
        pairs = zip(row.spent, stated, strict=True)
        cells = [f"**{s:.3g}**" if s > e * (1 + 1e-9) else f"{s:.3g}" for s, e in pairs]
        lines.append(
            f"| {row.method} | {row.rounds} | {row.releases} | {row.relation} | {row.accountant} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's per-order convergence notes
    for r in (25, 50):
        k = batch_size(r)
        q = k / PAPER_RECORDS
        print(f"\nR = {r}: K = {k}, q = {q:.3f}, q²R = {q * q * r:.2f}, δ = 1/{PAPER_RECORDS}²\n")
        print(markdown(rows(r)))

"""Privacy of the voting algorithms: sensitivities, the paper's closed-form σ, the per-query table.

Every answered query is one `VoteEvent` (noise std σ on each summed count, the L2 sensitivity
of the summed histogram, and the histogram itself). The project's accountants do the rest:
`rdp` gives the data-independent bound (Theorem 5: ε(α) = α·Δ²/(2σ²) per query), `pate` the
data-dependent one (PATE 2018 Thm 6 with Prop. 7's q, never above the data-independent value
at any order; reference/003_voting_dpfl.md §3.4). This module adds no RDP formula of its own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpfl.privacy import gnmax
from dpfl.privacy.accountants.rdp import DEFAULT_ORDERS, event_rdp
from dpfl.privacy.conversion import rdp_to_epsilon
from dpfl.privacy.events import VoteEvent
from dpfl.privacy.gnmax import vote_sensitivity
from dpfl.privacy.ledger import Ledger

__all__ = ["paper_sigma", "query_table", "vote_sensitivity"]


def paper_sigma(*, epsilon: float, delta: float, queries: int, sensitivity: float) -> float:
    """Returns the paper's σ for (ε, δ): Theorem 5 with the classic conversion, continuous α.

    Total RDP is ρ·α with ρ = Q·Δ²/(2σ²); min over α of ρα + log(1/δ)/(α−1) is
    ρ + 2√(ρ·log(1/δ)) (reference §6.5), so ρ* = (√(log(1/δ) + ε) − √log(1/δ))² and
    σ = Δ·√(Q / (2ρ*)). The ledger then reports what the project's accountant gives for it.
    """
    log_inv = math.log(1.0 / delta)
    rho = (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
    return sensitivity * math.sqrt(queries / (2.0 * rho))


def query_table(ledger: Ledger, *, delta: float, conversion: str = "tight") -> list[dict[str, Any]]:
    """Returns one row per answered query: its margin, its RDP and the cumulative ε both ways.

    Rows follow the ledger's order. Each row has `round`, `party`, `query` (index from 0 per
    party), the two largest counts `top1`, `top2` and their `gap`, `log_q` (Prop. 7's bound on
    the probability that the noisy argmax is not the noiseless one; NaN without a histogram),
    `order` (the Rényi order at which the party's whole data-dependent total converts to the
    smallest ε), the query's `rdp_independent` and `rdp_dependent` at that order, and the
    party's cumulative `epsilon_independent` / `epsilon_dependent` after this query.
    """
    orders = tuple(float(a) for a in DEFAULT_ORDERS)
    alphas = np.asarray(orders)
    votes = [e for e in ledger.entries if isinstance(e.event, VoteEvent)]
    if not votes:
        return []
    indep = np.stack([event_rdp(e.event, orders, False) for e in votes])
    dep = np.stack([event_rdp(e.event, orders, True) for e in votes])
    parties = np.array([e.party for e in votes])
    cum_indep, cum_dep = np.empty_like(indep), np.empty_like(dep)
    best: dict[str, int] = {}
    for party in dict.fromkeys(parties.tolist()):  # each party composes its own queries
        mine = parties == party
        cum_indep[mine] = np.cumsum(indep[mine], axis=0)
        cum_dep[mine] = np.cumsum(dep[mine], axis=0)
        best[party] = _best_order(alphas, cum_dep[mine][-1], delta, conversion)
    eps_indep = rdp_to_epsilon(alphas, cum_indep, delta=delta, conversion=conversion)
    eps_dep = rdp_to_epsilon(alphas, cum_dep, delta=delta, conversion=conversion)
    rows, seen = [], {}
    for i, entry in enumerate(votes):
        ev = entry.event
        counts = np.asarray(ev.counts if ev.counts is not None else (), dtype=float)
        top = np.sort(counts)[::-1][:2] if counts.size >= 2 else np.array([math.nan, math.nan])
        seen[entry.party] = seen.get(entry.party, -1) + 1
        order = best[entry.party]
        rows.append(
            {
                "round": entry.round,
                "party": entry.party,
                "query": seen[entry.party],
                "top1": float(top[0]),
                "top2": float(top[1]),
                "gap": float(top[0] - top[1]),
                "log_q": gnmax.gnmax_log_q(counts, noise_std=ev.noise_std) if counts.size >= 2 else math.nan,
                "order": float(alphas[order]),
                "rdp_independent": float(indep[i, order]),
                "rdp_dependent": float(dep[i, order]),
                "epsilon_independent": float(eps_indep[i]),
                "epsilon_dependent": float(eps_dep[i]),
            }
        )
    return rows


def _best_order(orders: np.ndarray, rdp: np.ndarray, delta: float, conversion: str) -> int:
    """Returns the index of the order at which the RDP curve `rdp` converts to the smallest ε."""
    # Row j keeps only order j (the others +inf), so row j's conversion is the ε of order j alone.
    single = np.where(np.eye(len(orders), dtype=bool), rdp[None, :], np.inf)
    return int(np.argmin(rdp_to_epsilon(orders, single, delta=delta, conversion=conversion)))

"""ISRL-DP Fed-SPIDER, the paper's alternate implementation (Alg. 11, App. H.1; reference §3.6).

SPIDER with phase length 2, two messages per silo per round. Round 1: each silo sends a fresh
noisy clipped minibatch gradient at w (as in MB-SGD) and the server sets v to their mean and
steps. Every later round: each silo sends the noisy difference of its clipped minibatch
gradients at w and at the previous iterate (one Poisson minibatch for both points), the server
adds their mean to v and steps; then each silo sends a fresh noisy gradient at the new w on a
fresh minibatch, the server sets v to their mean and steps again. So R rounds make 2R − 1
releases per silo and 2R − 1 steps, and every release is used by a step.

The paper's code makes the same 2R − 1 releases (it ends on a fresh gradient it never steps
with) but calibrates its σ for R: `calibration: paper` reproduces that σ (MB-SGD's closed form),
and the ledger records all 2R − 1 releases, so it shows the ε that σ really spends.

Both kinds of message carry noise multiplier σ on their true add/remove sensitivity: C for a
fresh sum, 2C for a sum of differences of gradients clipped to C (the code's choice: variance
×4 for the difference, reference §4.2). A message's minibatch and noise are keyed by its index
m = 1 … 2R − 1 (round r's difference is 2r − 2, its fresh gradient 2r − 1), so the two
messages of a round draw independently.
"""

from __future__ import annotations

import numpy as np

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants, silo_party
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.engine import clipped_grad_sum
from dpfl.privacy.events import Event
from dpfl.privacy.ledger import Ledger

__all__ = ["ISRLSpiderAlt"]


def messages(r: int) -> list[int]:
    """Returns the indices of round r's messages: [1] in round 1, then [2r − 2, 2r − 1]."""
    return [1] if r == 1 else [2 * r - 2, 2 * r - 1]


@ALGORITHMS.register("isrl_spider_alt")
class ISRLSpiderAlt(ISRLMinibatchSGD):
    """ISRL-DP Fed-SPIDER (Alg. 11): a noisy difference and a fresh noisy gradient every round."""

    batched = False  # its own `round`: runs of it train one by one
    summary = "ISRL-DP Fed-SPIDER (the paper's Alg. 11): two messages per silo per round, 2R − 1 in all"

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        # both kinds of message are the same event: a Poisson sample at q_i, multiplier σ_i
        event = [self.releases_per_round(s, float(sigma))[0] for s, sigma in enumerate(sigmas)]
        ledger = Ledger()
        for r in range(1, self.spec.rounds + 1):
            for s in participants(self.spec, r):
                for _ in messages(r):
                    ledger.record(r, silo_party(s), event[s])
        return ledger

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        self.w_prev = self.w

    def round(self, r: int) -> RoundOutput:
        clip = self.params.clip
        silos = participants(self.spec, r)
        if r > 1:  # the difference at (w, w_prev) on one minibatch, then a step with the updated v
            m = 2 * r - 2
            batch = self.batch(silos, m)
            now = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=clip)
            before = clipped_grad_sum(self.model, self.layout, self.w_prev, batch, clip=clip)
            diffs = self.release(now.sum - before.sum, silos, m, sensitivity=2 * clip)
            self.v = self.v + diffs.mean(0)
            self.w_prev, self.w = self.w, self.step(self.w, self.v)
        m = 2 * r - 1
        batch = self.batch(silos, m)
        fresh = clipped_grad_sum(self.model, self.layout, self.w, batch, clip=clip)
        self.v = self.release(fresh.sum, silos, m, sensitivity=clip).mean(0)
        self.w_prev, self.w = self.w, self.step(self.w, self.v)
        releases: dict[str, list[Event]] = {
            party: events * len(messages(r)) for party, events in self.released(silos).items()
        }
        return RoundOutput(metrics=self.batch_metrics(batch, fresh.norms), releases=releases)

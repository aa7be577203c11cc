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

from collections.abc import Sequence

import numpy as np

from dpfl.algorithms.base import ALGORITHMS, RoundOutput, participants, silo_party
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD, clipped_by_run
from dpfl.privacy.events import Event
from dpfl.privacy.ledger import Ledger, LedgerEntry

__all__ = ["ISRLSpiderAlt"]


def messages(r: int) -> list[int]:
    """Returns the indices of round r's messages: [1] in round 1, then [2r − 2, 2r − 1]."""
    return [1] if r == 1 else [2 * r - 2, 2 * r - 1]


@ALGORITHMS.register("isrl_spider_alt")
class ISRLSpiderAlt(ISRLMinibatchSGD):
    """ISRL-DP Fed-SPIDER (Alg. 11): a noisy difference and a fresh noisy gradient every round."""

    batched = True
    summary = "ISRL-DP Fed-SPIDER (the paper's Alg. 11): two messages per silo per round, 2R − 1 in all"

    def plan(self, noise_multiplier: float | np.ndarray) -> Ledger:
        sigmas = np.broadcast_to(np.asarray(noise_multiplier, dtype=float), (self.spec.dataset.silos,))
        # both kinds of message are the same event: a Poisson sample at q_i, multiplier σ_i
        event = [self.releases_per_round(s, float(sigma))[0] for s, sigma in enumerate(sigmas)]
        parties = [silo_party(s) for s in range(len(sigmas))]
        return Ledger(
            LedgerEntry(r, parties[s], event[s])
            for r in range(1, self.spec.rounds + 1)
            for s in participants(self.spec, r, self.noise_key).tolist()
            for _ in messages(r)
        )

    def setup(self, noise_multiplier) -> None:
        super().setup(noise_multiplier)
        self.w_prev = self.w

    def round(self, r: int) -> RoundOutput:
        return self.round_many([self], r)[0]

    @classmethod
    def round_many(cls, runs: Sequence[ISRLSpiderAlt], r: int) -> list[RoundOutput]:
        """Round r of several runs at once: each message's gradients of every run's silos in one
        gradient call (the difference's at w and the previous iterate together); each run
        releases and steps alone between the two messages."""
        chosen = [participants(run.spec, r, run.noise_key) for run in runs]
        if r > 1:  # the difference at (w, w_prev) on one minibatch, then a step with the updated v
            m = 2 * r - 2
            batches = [run.batch(silos, m) for run, silos in zip(runs, chosen, strict=True)]
            points = [run.w for run in runs] + [run.w_prev for run in runs]
            clipped = clipped_by_run(runs, points, batches * 2)
            for i, (run, silos) in enumerate(zip(runs, chosen, strict=True)):
                now, before = clipped[i][0], clipped[len(runs) + i][0]
                diffs = run.release(now - before, silos, m, sensitivity=2 * run.params.clip)
                run.v = run.v + diffs.mean(0)
                run.w_prev, run.w = run.w, run.step(run.w, run.v)
        m = 2 * r - 1
        batches = [run.batch(silos, m) for run, silos in zip(runs, chosen, strict=True)]
        fresh = clipped_by_run(runs, [run.w for run in runs], batches)
        out = []
        for run, silos, batch, (sums, norms) in zip(runs, chosen, batches, fresh, strict=True):
            run.v = run.release(sums, silos, m, sensitivity=run.params.clip).mean(0)
            run.w_prev, run.w = run.w, run.step(run.w, run.v)
            releases: dict[str, list[Event]] = {
                party: events * len(messages(r)) for party, events in run.released(silos).items()
            }
            out.append(RoundOutput(metrics=run.batch_metrics(batch, norms), releases=releases))
        return out

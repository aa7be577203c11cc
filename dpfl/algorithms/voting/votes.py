"""Vote histograms and the noisy argmax (reference/003_voting_dpfl.md §2.1, §2.3).

For each public query x the agents' votes are summed into a C-vector: one-hot predictions of
the agents' local models (AE-DPFL) or each agent's label frequencies among its k nearest
neighbours (kNN-DPFL). Both are computed for all agents at once: `torch.func.vmap` over the
stacked local models, and batched `torch.cdist` / `topk` over the agents' padded feature
sets. The noiseless histograms do not depend on σ, which is why `cache` keeps them.

The release is the argmax of the summed noisy votes. Each agent adds its own share
N(0, σ²/N) to every coordinate, so the sum carries N(0, σ²) (independent shares add), and
only the winning label leaves the secure aggregation (MPC-vote, simulated, §1.4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from dpfl.engine import ParamLayout
from dpfl.engine.release import release_noise

__all__ = ["VOTE_NOISE_STREAM", "knn_votes", "noisy_argmax", "one_hot_votes", "predicted_labels"]

VOTE_NOISE_STREAM = 7
"""Stream of the agents' vote-noise shares (the engine's own streams are 0 and 1)."""

_CHUNK_BYTES = 128 << 20  # working memory per block of agents × queries


@torch.no_grad()
def predicted_labels(
    model: nn.Module, layout: ParamLayout, params: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    """Returns each model's predicted label on each record, [S, n] int64, from params [S, P].

    The model predicts in eval mode (no dropout: a deployed model predicts without it), so a
    label is a function of the model's parameters and the record alone and draws nothing; the
    model is left in the mode it was in.
    """
    training = model.training
    model.eval()
    try:
        return _predicted_labels(model, layout, params, x)
    finally:
        model.train(training)


def _predicted_labels(
    model: nn.Module, layout: ParamLayout, params: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    per_model = vmap(lambda p, xb: functional_call(model, p, (xb,)).argmax(-1), in_dims=(0, None))
    # Activations dominate memory; a generous bound of 64 floats per input entry per model.
    per_row = 4 * 64 * max(1, math.prod(x.shape[1:]))
    rows = max(1, min(len(x), _CHUNK_BYTES // per_row))
    models = max(1, _CHUNK_BYTES // (per_row * rows))
    out = torch.empty(params.shape[0], len(x), dtype=torch.long)
    for s in range(0, params.shape[0], models):
        views = layout.unflatten(params[s : s + models])
        for start in range(0, len(x), rows):
            out[s : s + models, start : start + rows] = per_model(views, x[start : start + rows])
    return out


def one_hot_votes(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Returns the summed one-hot votes [n, C] (float64) of per-model labels [S, n]."""
    counts = torch.zeros(labels.shape[1], num_classes, dtype=torch.float64)
    counts.scatter_add_(1, labels.T.contiguous(), torch.ones(labels.T.shape, dtype=torch.float64))
    return counts


@torch.no_grad()
def knn_votes(
    features: torch.Tensor,
    labels: torch.Tensor,
    rows: Sequence[torch.Tensor],
    queries: torch.Tensor,
    *,
    k: int,
    num_classes: int,
) -> torch.Tensor:
    """Returns Σ_agents (1/k)·(label counts among the agent's k nearest records), [Q, C] float64.

    Neighbours are by Euclidean distance in the given (public) feature space, within each
    agent's own records `features[rows[a]]`. The 1/k normalisation puts each agent's vote on
    the simplex, so one agent changes the sum by at most 1 in L2 and one record by √2/k.

    Args:
        features: every training record's features [n, d].
        labels: every training record's label [n].
        rows: one index tensor per agent; each must hold at least k records.
        queries: the public queries' features [Q, d].
    """
    sizes = [len(r) for r in rows]
    if min(sizes) < k:
        raise ValueError(f"every agent needs at least k = {k} records; the smallest has {min(sizes)}")
    width = max(sizes)
    feats = torch.zeros(len(rows), width, features.shape[1], dtype=features.dtype)
    labs = torch.zeros(len(rows), width, dtype=torch.long)
    pad = torch.ones(len(rows), width, dtype=torch.bool)
    for a, r in enumerate(rows):
        feats[a, : len(r)] = features[r]
        labs[a, : len(r)] = labels[r]
        pad[a, : len(r)] = False
    counts = torch.zeros(len(queries), num_classes, dtype=torch.float64)
    q_chunk = max(1, min(len(queries), 1024))
    a_chunk = max(1, _CHUNK_BYTES // (4 * q_chunk * width))
    for a in range(0, len(rows), a_chunk):
        fa, la, pa = feats[a : a + a_chunk], labs[a : a + a_chunk], pad[a : a + a_chunk]
        for q in range(0, len(queries), q_chunk):
            xq = queries[q : q + q_chunk].unsqueeze(0).expand(len(fa), -1, -1)
            dist = torch.cdist(xq, fa).masked_fill_(pa.unsqueeze(1), math.inf)  # [a, Qc, n]
            nearest = dist.topk(k, dim=-1, largest=False).indices
            votes = la.unsqueeze(1).expand(-1, nearest.shape[1], -1).gather(2, nearest)
            counts[q : q + q_chunk] += F.one_hot(votes, num_classes).sum(dim=(0, 2)).to(torch.float64)
    return counts / k


def noisy_argmax(
    counts: np.ndarray, *, sigma: float, num_agents: int, seed: int, round: int
) -> tuple[np.ndarray, np.ndarray]:
    """Returns (released labels [Q], noisy sums [Q, C]): argmax of counts + Σ_agents N(0, σ²/N).

    Agent a's shares come from `silo_generator(seed, a, round, VOTE_NOISE_STREAM)`, drawn as
    standard normals and scaled, so runs that differ only in σ see proportional noise.
    """
    # Through the release tap (dpfl.engine.release), so the auditor sees the histogram before
    # noise; the draws are those of `gaussian_noise` on the same generators, so the numbers do
    # not change. Only the votes' sum is known here (the cache keeps sums), so each agent's row
    # carries 1/N of it: what the tap compares is the row sum, the one value the secure
    # aggregation reveals (`secure_sum`), with std √(N·σ²/N) = σ.
    total = torch.tensor(np.asarray(counts, dtype=np.float64))  # a copy: cached votes are read-only
    shares = release_noise(
        (total / num_agents).expand(num_agents, *total.shape),
        sigma / math.sqrt(num_agents),
        seed=seed,
        silos=range(num_agents),
        round=round,
        stream=VOTE_NOISE_STREAM,
        secure_sum=True,
    )
    noisy = np.asarray(counts, dtype=np.float64) + shares.sum(0).cpu().numpy()
    return noisy.argmax(axis=1), noisy

"""How many model copies to train in one batched computation: as many as fit in the cache.

Training S models at once (ULDP's user–silo pairs, the voting agents) reads and writes each
model, its update and its gradient, and a minibatch of inputs, several times per local step.
Past the CPU's cache every such pass goes to memory, and a batched step over hundreds of
50,890-parameter models (over 100 MB) ends up slower than a Python loop over the models.
Blocks sized to the cache keep them there; small models still batch in blocks of hundreds.
"""

from __future__ import annotations

import torch

from dpfl.device import block_bytes, cpu

__all__ = ["CACHE_BYTES", "MAX_GPU_MODELS", "MAX_MODELS", "models_per_block"]

CACHE_BYTES = 16 << 20
"""Working set of one block of models. Measured on MNIST with the 50,890-parameter MLP, one
thread, AMD EPYC: a ULDP-AVG round in blocks of 8 pairs (8 MiB) runs 3.2× faster than in
blocks of 256 (100 users), blocks of 16 8× faster (10,000 users); AE-DPFL's 100 agents
1.6–1.8× faster in blocks of 10. On an Intel Xeon (2 MiB of L2 per core), 16 MiB against
8 MiB, medians of 7 rounds in two runs each: the 100-user round 0.321/0.305 s against
0.348/0.333 s on one thread and 0.205/0.221 s against 0.257/0.253 s on two (a thread's half
of the block is what its cache holds); 10,000 users 3.64/4.32 s against 4.86/5.03 s; 100
agents of 600 records 0.238/0.253 s against 0.277/0.293 s; the CNN round the same (7.06 s
against 7.10 s); 24 MiB slower again for 100 users on one thread (0.358/0.340 s)."""
MAX_MODELS = 256
"""Most models per block: small models (logistic regression) gain from batching up to here."""
MAX_GPU_MODELS = 4096
"""Most models per block on a GPU, whose blocks fill an eighth of its memory (`dpfl.device.block_bytes`)."""


def models_per_block(params: int, batch: int, features: int) -> int:
    """Returns how many models fit in `CACHE_BYTES` (at least 1, at most `MAX_MODELS`); on a GPU (the
    device tensors are created on now), how many fit in its block's memory, at most `MAX_GPU_MODELS`.

    Args:
        params: parameters per model; a model holds its weights, update and gradient.
        batch: records per local step.
        features: numbers per record (the input's size).
    """
    per_model = 4 * (3 * params + batch * features)  # float32
    most = MAX_MODELS if cpu(torch.get_default_device()) else MAX_GPU_MODELS
    return max(1, min(most, block_bytes(CACHE_BYTES) // per_model))

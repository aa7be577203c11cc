"""Gradients for all silos of a round in one batched computation.

Every function takes the parameters flat: [S, P] (one model per silo, e.g. after local steps)
or [P] (one model shared by every silo, e.g. the server's model in a minibatch-SGD round).
The loss is the cross-entropy of each sample; masked (padded) samples contribute exactly
zero. Silos never interact: silo s's results depend only on silo s's parameters and data.

The generic path is `torch.func` — ``vmap`` over silos of ``vmap`` over samples of ``grad``
of one sample's loss through ``functional_call`` — and materialises per-sample gradients
[S, B, P]. For models made only of linear layers and elementwise activations,
`clipped_grad_sum` and `mean_grad` take the ghost-clipping path (`dpfl.engine.ghost`),
which never does; for convolutional stacks (``cnn``, ``lenet``, ``cifar_cnn``) per-sample
gradients and clipped sums come from one dense pass over the samples that share a model
(`dpfl.engine.convclip`).
Work is split into chunks of silos (then of samples) so that the working memory stays under
``memory_budget_bytes``; chunking changes results only by floating-point summation order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfl.device import block_bytes
from dpfl.engine import convclip, convnet, ghost
from dpfl.engine.batch import SiloBatch
from dpfl.engine.params import ParamLayout
from dpfl.metrics import balanced_accuracy
from dpfl.models import draws_randomness

__all__ = [
    "ClippedSum",
    "Evaluation",
    "clipped_grad_sum",
    "evaluate",
    "ghost_clipping_applies",
    "mean_grad",
    "per_sample_grads",
]

DEFAULT_MEMORY_BUDGET_BYTES = 1 << 30

Method = Literal["auto", "ghost", "per_sample"]


@dataclass(frozen=True)
class ClippedSum:
    """Each silo's sum of clipped per-sample gradients.

    Attributes:
        sum: Σᵢ clip_C(∇ℓᵢ) over the silo's real samples, [S, P], where
            clip_C(g) = g · min(1, C/‖g‖₂) with ‖·‖₂ over the whole flattened gradient.
        count: number of real (unmasked) samples per silo, [S] int64.
        norms: unclipped per-sample norms ‖∇ℓᵢ‖₂, [S, B]; 0 for masked samples.
    """

    sum: torch.Tensor
    count: torch.Tensor
    norms: torch.Tensor


class Evaluation(NamedTuple):
    """One model's test metrics (`evaluate`): mean cross-entropy loss, accuracy and balanced
    accuracy, both in [0, 1]."""

    loss: float
    accuracy: float
    balanced_accuracy: float


def ghost_clipping_applies(model: nn.Module) -> bool:
    """Returns True when `clipped_grad_sum` can use ghost clipping for ``model``."""
    return ghost.linear_stack(model) is not None


def per_sample_grads(
    model: nn.Module,
    layout: ParamLayout,
    flat_params: torch.Tensor,
    batch: SiloBatch,
    *,
    memory_budget_bytes: int | None = None,
) -> torch.Tensor:
    """Returns every sample's loss gradient as [S, B, P]; rows of masked samples are zero."""
    _check(layout, flat_params, batch)
    out = torch.empty(batch.num_silos, batch.batch_size, layout.size, dtype=flat_params.dtype)
    budget = _budget(memory_budget_bytes, flat_params)
    convs = _conv_path(model, flat_params)
    per_sample = _bytes_per_sample(layout, batch, None, convs)
    for silos, samples in _blocks(batch, per_sample, budget):
        params = _rows(flat_params, silos)
        part = _slice(batch, silos, samples)
        if convs is not None:
            out[silos, samples] = convclip.per_sample(convs, layout, params, part)
        else:
            out[silos, samples] = _per_sample_block(model, layout, params, part)
    return out


def clipped_grad_sum(
    model: nn.Module,
    layout: ParamLayout,
    flat_params: torch.Tensor,
    batch: SiloBatch,
    *,
    clip: float,
    method: Method = "auto",
    memory_budget_bytes: int | None = None,
) -> ClippedSum:
    """Returns each silo's sum of per-sample gradients clipped to L2 norm ≤ ``clip``.

    The clip factor min(1, C/‖g‖) is computed as C / max(‖g‖, C): no division by zero for a
    zero gradient, and never above 1. This is the Gaussian mechanism's sum query with
    sensitivity C under add/remove-one-record (Abadi et al. 2016, Algorithm 1). Linear stacks
    (``logreg``, ``mlp``) take ghost clipping, which gives the same sum without materialising
    per-sample gradients; convolutional stacks take `convclip` (ghost norms for their linear
    layers, per-sample gradients of their convolutions from a dense pass); other models clip
    materialised per-sample gradients, in chunks.

    Args:
        clip: the clipping norm C > 0, in gradient L2 units.
        method: ``"ghost"`` (linear stacks only), ``"per_sample"`` (any model: the generic
            ``vmap`` path, the reference the others are tested against), or ``"auto"``, which
            picks ghost clipping or `convclip` whenever one applies.

    Raises:
        ValueError: ``clip`` is not a positive finite number, or ``method="ghost"`` for a
            model that is not a stack of linear layers and elementwise activations.
    """
    if not (isinstance(clip, int | float) and math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a positive finite number; got {clip!r}")
    if method not in ("auto", "ghost", "per_sample"):
        raise ValueError(f"method must be 'auto', 'ghost' or 'per_sample'; got {method!r}")
    _check(layout, flat_params, batch)
    stack = ghost.linear_stack(model) if method in ("auto", "ghost") else None
    if method == "ghost" and stack is None:
        raise ValueError(
            f"method='ghost' needs a Sequential of Linear layers and elementwise activations; "
            f"got {type(model).__name__}; use method='per_sample' or 'auto'"
        )
    convs = _conv_path(model, flat_params) if method == "auto" and stack is None else None
    total = torch.zeros(batch.num_silos, layout.size, dtype=flat_params.dtype)
    norms = torch.zeros(batch.num_silos, batch.batch_size, dtype=flat_params.dtype)
    per_sample = _bytes_per_sample(layout, batch, stack, convs)
    for silos, samples in _blocks(batch, per_sample, _budget(memory_budget_bytes, flat_params)):
        params = _rows(flat_params, silos)
        part = _slice(batch, silos, samples)
        if stack is not None:
            inputs, grads = ghost.output_grads(stack, layout, params, part)
            block_norms = ghost.squared_norms(inputs, grads, stack).sqrt_()
            factors = _clip_factors(block_norms, part.mask, clip)
            block_sum = ghost.weighted_sum_(inputs, grads, factors, stack, layout)
        elif convs is not None:
            factors_of = functools.partial(_clip_factors, clip=clip)
            block_sum, block_norms = convclip.clipped_sum(convs, layout, params, part, factors_of)
        else:
            g = _per_sample_block(model, layout, params, part)
            block_norms = torch.linalg.vector_norm(g, dim=-1)
            factors = _clip_factors(block_norms, part.mask, clip)
            block_sum = torch.einsum("sb,sbp->sp", factors, g)
        norms[silos, samples] = block_norms * part.mask
        total[silos] += block_sum
    return ClippedSum(total, batch.counts(), norms)


def mean_grad(
    model: nn.Module,
    layout: ParamLayout,
    flat_params: torch.Tensor,
    batch: SiloBatch,
    *,
    memory_budget_bytes: int | None = None,
) -> torch.Tensor:
    """Returns each silo's non-private gradient of its mean loss over real samples, [S, P].

    A silo with no real sample gets a zero gradient. Linear stacks take the same hand-written
    forward and backward passes as ghost clipping, with weights 1/count and no norms, so that
    a DP round and its non-private twin differ only by what privacy adds; convolutional stacks
    on the CPU take `convnet`'s written-out passes, a silo at a time; other models take ``vmap`` over
    silos of ``grad`` of the silo's mean loss (no per-sample gradients).
    """
    _check(layout, flat_params, batch)
    stack = ghost.linear_stack(model)
    # the written-out passes beat vmap's grouped convolutions on the CPU; on a GPU, vmap's one
    # kernel for all rows beats a launch per row
    on_cpu = flat_params.device.type == "cpu"
    convs = convnet.conv_stack(model) if stack is None and on_cpu else None
    total = torch.zeros(batch.num_silos, layout.size, dtype=flat_params.dtype)
    per_sample = ghost.bytes_per_sample(stack) if stack else _generic_bytes_per_sample(layout, batch)
    weights = batch.mask / batch.counts().clamp(min=1).unsqueeze(1).to(flat_params.dtype)
    for silos, samples in _blocks(batch, per_sample, _budget(memory_budget_bytes, flat_params)):
        params = _rows(flat_params, silos)
        part = _slice(batch, silos, samples)
        if stack is not None:
            inputs, grads = ghost.output_grads(stack, layout, params, part)
            total[silos] += ghost.weighted_sum_(inputs, grads, weights[silos, samples], stack, layout)
        elif convs is not None:
            total[silos] += convnet.loss_grads(convs, layout, params, part, weights[silos, samples])
        else:
            total[silos] += _weighted_loss_grad(model, layout, params, part, weights[silos, samples])
    return total


@torch.no_grad()
def evaluate(
    model: nn.Module,
    layout: ParamLayout,
    flat_params: torch.Tensor,
    x: np.ndarray | torch.Tensor,
    y: np.ndarray | torch.Tensor,
    *,
    batch_size: int,
) -> Evaluation:
    """Returns the mean cross-entropy loss, accuracy and balanced accuracy of one model [P] on (x, y).

    Predictions are the argmax of the logits; ties go to the lower class index. Accuracy counts
    predictions equal to the label; balanced accuracy is `dpfl.metrics.balanced_accuracy`. The
    model is evaluated in eval mode (no dropout) and left in the mode it was in.
    """
    if flat_params.dim() != 1:
        raise ValueError(
            f"evaluate takes one model's flat parameters [P]; got shape {tuple(flat_params.shape)}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1; got {batch_size}")
    params = layout.unflatten(flat_params)
    xs, ys = torch.as_tensor(x).to(flat_params.dtype), torch.as_tensor(y).long()
    if len(xs) == 0:
        raise ValueError("evaluate needs at least one sample; got none")
    # its pools are several times faster than max_pool2d's on the CPU
    convs = convnet.conv_stack(model) if flat_params.device.type == "cpu" else None
    loss, predictions = 0.0, []
    training = model.training
    model.eval()
    try:
        for start in range(0, len(xs), batch_size):
            part = xs[start : start + batch_size]
            logits = convnet.logits(convs, params, part) if convs else functional_call(model, params, (part,))
            loss += F.cross_entropy(logits, ys[start : start + batch_size], reduction="sum").item()
            predictions.append(logits.argmax(dim=1))
    finally:
        model.train(training)
    predicted, labels = torch.cat(predictions).cpu(), ys.cpu()
    correct = int((predicted == labels).sum())
    return Evaluation(loss / len(xs), correct / len(xs), balanced_accuracy(labels, predicted))


def _budget(given: int | None, flat_params: torch.Tensor) -> int:
    """Returns the working memory of a block: as given, else the default of the params' device."""
    return given if given is not None else block_bytes(DEFAULT_MEMORY_BUDGET_BYTES, flat_params.device)


def _check(layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch) -> None:
    shape = tuple(flat_params.shape)
    if shape not in ((layout.size,), (batch.num_silos, layout.size)):
        raise ValueError(
            f"flat_params must be [P] = ({layout.size},) or [S, P] = "
            f"({batch.num_silos}, {layout.size}); got {shape}"
        )


def _clip_factors(norms: torch.Tensor, mask: torch.Tensor, clip: float) -> torch.Tensor:
    """Returns min(1, C/‖g‖) as C / max(‖g‖, C), and 0 for masked samples, [S, B]."""
    return (clip / norms.clamp(min=clip)) * mask


def _conv_path(model: nn.Module, flat_params: torch.Tensor) -> convnet.ConvStack | None:
    """Returns the model as a `convnet.ConvStack` when `convclip` computes its per-sample
    gradients here, else None (the generic path).

    Only for one model shared by all silos ([P], an MB-SGD round at the server's model), where
    one dense pass covers every silo's samples, and only on a GPU (`_dense_pays`). One model per
    silo ([S, P]) would need a pass per silo, and there ``vmap``'s one kernel for all silos beats
    a launch per silo, as in `mean_grad`.
    """
    if flat_params.dim() != 1 or not _dense_pays(flat_params.device):
        return None
    return convnet.conv_stack(model)


def _dense_pays(device: torch.device) -> bool:
    """Returns whether `convclip`'s dense pass beats ``vmap`` on `device`: on a GPU, not on the CPU.

    On the CPU the unfolded inputs cost more than ``vmap``'s grouped convolutions: a CIFAR-10
    round's (10 silos × 346 samples, 2 threads) took 7.2 s against 1.6 s, 6.0 s of it in
    ``im2col``, which runs there at a small fraction of the memory's speed; a strided copy of the
    columns instead still took 1.5–2.5 s for the first convolution alone.
    """
    return device.type != "cpu"


def _bytes_per_sample(
    layout: ParamLayout, batch: SiloBatch, stack: ghost.LinearStack | None, convs: convnet.ConvStack | None
) -> int:
    """Returns the working memory one sample needs on the path the model takes."""
    if stack is not None:
        return ghost.bytes_per_sample(stack)
    if convs is not None:
        return convclip.bytes_per_sample(convs, tuple(batch.x.shape[2:]))
    return _generic_bytes_per_sample(layout, batch)


def _generic_bytes_per_sample(layout: ParamLayout, batch: SiloBatch) -> int:
    # The per-sample gradient dict, its flattened copy and the clipped product: 3·P floats
    # (4·P for headroom), plus activations, bounded by a generous multiple of the input size.
    features = math.prod(batch.x.shape[2:])
    return 4 * (4 * layout.size + 64 * features)


def _blocks(batch: SiloBatch, bytes_per_sample: int, budget: int) -> Iterator[tuple[slice, slice]]:
    """Yields (silos, samples) slices whose working memory stays under ``budget`` bytes."""
    if batch.batch_size == 0:  # no sample at all: every result is zero
        return
    num_silos, size = batch.num_silos, batch.batch_size
    per_silo = size * bytes_per_sample
    if per_silo <= budget:
        step = max(1, budget // per_silo)
        for s in range(0, num_silos, step):
            yield slice(s, min(s + step, num_silos)), slice(0, batch.batch_size)
        return
    step = max(1, budget // bytes_per_sample)
    for s in range(num_silos):
        for b in range(0, batch.batch_size, step):
            yield slice(s, s + 1), slice(b, min(b + step, batch.batch_size))


def _rows(flat_params: torch.Tensor, silos: slice) -> torch.Tensor:
    return flat_params if flat_params.dim() == 1 else flat_params[silos]


def _slice(batch: SiloBatch, silos: slice, samples: slice) -> SiloBatch:
    if silos == slice(0, batch.num_silos) and samples == slice(0, batch.batch_size):
        return batch
    return SiloBatch(batch.x[silos, samples], batch.y[silos, samples], batch.mask[silos, samples])


def _per_sample_block(
    model: nn.Module, layout: ParamLayout, flat_params: torch.Tensor, part: SiloBatch
) -> torch.Tensor:
    """Returns per-sample gradients [s, b, P] of one block of the batch, masked rows zeroed."""

    def sample_loss(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, params, (x.unsqueeze(0),))
        return F.cross_entropy(logits, y.unsqueeze(0))

    randomness = _randomness(model)
    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0), randomness=randomness)
    params = layout.unflatten(flat_params.detach())
    per_silo = vmap(per_sample, in_dims=(0 if flat_params.dim() == 2 else None, 0, 0), randomness=randomness)
    g = layout.flatten(per_silo(params, part.x, part.y))
    # A product with the float mask (boolean kernels are slow on CPU): exact zeros, since
    # padding is finite and so is its gradient.
    return g.mul_(part.mask.to(g.dtype).unsqueeze(-1))


def _weighted_loss_grad(
    model: nn.Module, layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch, weights: torch.Tensor
) -> torch.Tensor:
    """Returns ∇ Σᵢ wᵢ ℓᵢ per silo, [s, P], without per-sample gradients."""

    def silo_loss(
        params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor:
        losses = F.cross_entropy(functional_call(model, params, (x,)), y, reduction="none")
        return (torch.where(w > 0, losses, 0.0) * w).sum()

    params = layout.unflatten(flat_params.detach())
    in_dims = (0 if flat_params.dim() == 2 else None, 0, 0, 0)
    per_silo = vmap(grad(silo_loss), in_dims=in_dims, randomness=_randomness(model))
    return layout.flatten(per_silo(params, batch.x, batch.y, weights))


def _randomness(model: nn.Module) -> Literal["error", "different"]:
    """Returns ``vmap``'s randomness for ``model``: "different" when its forward draws (dropout in
    training mode), so each silo's and each sample's masks are drawn apart, from the global
    generator (the runner forks and seeds it per run and round); "error" otherwise, so that no
    other draw slips in unseen. Masks are drawn a block at a time (`_blocks`), so they also depend
    on the memory budget that sets the blocks: the same on one device and budget."""
    return "different" if draws_randomness(model) else "error"

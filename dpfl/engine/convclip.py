"""Convolutional stacks: every sample's gradient, its norm and the clipped sum, from one dense pass.

`clipped_grad_sum` needs, for every sample i, ‖∇ℓᵢ‖₂ over the whole flattened gradient and then
Σᵢ cᵢ ∇ℓᵢ per silo. The generic path (``vmap`` over silos of ``vmap`` over samples of ``grad``)
turns each convolution's weight gradient into a grouped convolution with one group per sample and
materialises [S, B, P]; on a GPU those grouped kernels, not the arithmetic, took most of a
CIFAR-10 ISRL-DP round (benchmarks/devices.py: 4.9× Opacus's loop on an H100, whose hooks use the
products below). For the stacks `convnet.conv_stack` accepts (``cnn``, ``lenet``, ``cifar_cnn``)
this module instead runs one dense forward and one backward pass over all the samples that share
a parameter vector — in an ISRL-DP MB-SGD round every silo's samples at once, since each silo
computes at the server's model [P] — keeping each parametrised layer's input aᵢ and the gradient
gᵢ of sample i's own loss at its output. A layer's per-sample gradient follows from these two
(Goodfellow 2015; Opacus's grad samplers; Bu et al. 2023, "Differentially private optimization on
large model at small cost"):

- a linear layer z = W a + b: ∇_W ℓᵢ = gᵢ aᵢᵀ and ∇_b ℓᵢ = gᵢ. Its squared norm is the ghost norm
  (‖aᵢ‖² + 1)·‖gᵢ‖² and its share of the clipped sum one matrix product (cᵢ gᵢ)ᵀ aᵢ per silo: nothing
  per sample is materialised (ghost clipping, as in `ghost`);
- a convolution: ∇_W ℓᵢ = Σₜ gᵢₜ uᵢₜᵀ over the output positions t, where uᵢₜ is the input patch
  under the kernel at t (a column of `F.unfold`), and ∇_b ℓᵢ = Σₜ gᵢₜ. The per-sample weight
  gradient is materialised, as one batched product [O, T] × [T, C·k²] per sample: it has only
  O·C·k² entries (456 and 2,416 for the CIFAR CNN's two convolutions), and the ghost norm
  Σₜ,ₜ' (uᵢₜ·uᵢₜ')(gᵢₜ·gᵢₜ') would cost T² = 614,656 products a sample for the first (28×28
  outputs) against its O·C·k²·T = 352,800 (Bu et al.'s mixed rule picks materialising whenever
  2T² > O·C·k², as it does for every convolution of these models).

The clip factors cᵢ = min(1, C/‖∇ℓᵢ‖) then weight the saved quantities once more, so nothing of
size [S, B, P] is allocated unless per-sample gradients themselves are asked for (`per_sample`).
The forward pass and the pools are `convnet`'s, so a convolutional model's logits are the same on
this path as in `mean_grad` and `evaluate` on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import passes
from dpfl.engine.batch import SiloBatch
from dpfl.engine.convnet import ConvStack, _forward, _pool_backward
from dpfl.engine.params import ParamLayout

__all__ = ["Outer", "Sampled", "bytes_per_sample", "clipped_sum", "per_sample", "sample_parts"]


@dataclass(frozen=True)
class Outer:
    """A linear layer's per-sample gradients, kept as the factors of their outer products.

    Attributes:
        names: the (weight name, bias name or None) in the layout.
        a: the layer's inputs aᵢ, [N, in].
        g: the gradient of sample i's own loss at the layer's output, gᵢ, [N, out].
    """

    names: tuple[str, str | None]
    a: torch.Tensor
    g: torch.Tensor


@dataclass(frozen=True)
class Sampled:
    """A convolution's per-sample gradients, materialised.

    Attributes:
        names: the (weight name, bias name or None) in the layout.
        weight: ∇_W ℓᵢ as [N, O, C·kh·kw] (the weight's own order, flattened).
        bias: ∇_b ℓᵢ as [N, O], or None without a bias.
    """

    names: tuple[str, str | None]
    weight: torch.Tensor
    bias: torch.Tensor | None


Part = Outer | Sampled
FactorsOf = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def bytes_per_sample(stack: ConvStack, sample_shape: tuple[int, ...]) -> int:
    """Returns a generous estimate of the working memory one sample needs on this path, in bytes.

    Per convolution: its input's unfolded columns (C·k² values per output position), its output
    and the gradient there, and the per-sample weight gradient; per other layer its output, kept
    for the backward pass. Doubled for the temporaries of the passes.
    """
    shape = (1, *sample_shape) if stack.lead is not None else tuple(sample_shape)
    floats = math.prod(shape)
    for layer in stack.layers:
        if isinstance(layer, nn.Conv2d):
            (kh, kw), (ph, pw) = layer.kernel_size, layer.padding
            out = (layer.out_channels, shape[1] + 2 * ph - kh + 1, shape[2] + 2 * pw - kw + 1)
            columns = shape[0] * kh * kw * out[1] * out[2]
            floats += columns + 3 * math.prod(out) + layer.out_channels * shape[0] * kh * kw
            shape = out
        elif isinstance(layer, nn.MaxPool2d):
            shape = (shape[0], shape[1] // 2, shape[2] // 2)
            floats += 4 * math.prod(shape)  # the pooled values and the three choices
        elif isinstance(layer, nn.Flatten):
            shape = (math.prod(shape),)
        elif isinstance(layer, nn.Linear):
            shape = (layer.out_features,)
            floats += 3 * (layer.in_features + layer.out_features)
        else:
            floats += 2 * math.prod(shape)
    return 2 * 4 * floats


def sample_parts(
    stack: ConvStack,
    params: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
) -> list[Part]:
    """Returns every parametrised layer's per-sample gradient parts for samples x [N, ...].

    One dense forward and backward pass at one model `params`; gᵢ is the gradient of wᵢ·ℓᵢ,
    so a sample of weight 0 (padding) has gradient 0 exactly. Parts come in layer order.
    """
    saved: list[object] = []  # per layer: what its backward needs
    with torch.no_grad():
        g = passes.cross_entropy_grad_(_forward(stack, params, x, saved), y, weight)
        parts: list[Part] = []
        first = next(k for k, names in enumerate(stack.weights) if names is not None)
        for k in range(len(stack.layers) - 1, first - 1, -1):
            layer, names, held = stack.layers[k], stack.weights[k], saved[k]
            if isinstance(layer, nn.Linear):
                parts.append(Outer(names, held, g))
                if k > first:  # a new tensor: the part keeps its g
                    g = g @ params[names[0]]
            elif isinstance(layer, nn.Conv2d):
                parts.append(_conv_part(layer, names, held, g))
                if k > first:
                    g = _conv_input_grad(layer, params[names[0]], g, held.shape[-2:])
            elif isinstance(layer, nn.MaxPool2d):
                g = _pool_backward(g, *held)
            elif isinstance(layer, nn.Flatten):
                g = g.view(held)
            else:
                g = passes.activation_backward(layer, g, held)
    parts.reverse()
    return parts


def _conv_part(layer: nn.Conv2d, names: tuple[str, str | None], a: torch.Tensor, g: torch.Tensor) -> Sampled:
    """Returns a convolution's per-sample gradients from its input a [N, C, H, W] and output
    gradient g [N, O, H', W']: Σₜ gᵢₜ uᵢₜᵀ as one batched product with the unfolded input."""
    n, out = g.shape[:2]
    weight = torch.bmm(g.reshape(n, out, -1), _columns(a, layer).transpose(1, 2))
    return Sampled(names, weight, g.sum(dim=(2, 3)) if names[1] else None)


def _columns(a: torch.Tensor, layer: nn.Conv2d) -> torch.Tensor:
    """Returns `F.unfold(a)` for a plain convolution (stride 1, `convnet._plain_conv`): [N, C·kh·kw, T],
    each column the input under the kernel at one output position.

    Built from strided views and one copy: CUDA's `F.unfold` runs one im2col kernel per sample,
    and 3,460 CIFAR images made that 20,760 launches and 93 % of the pass's GPU time (an H200:
    the dense pass 60 ms against vmap's 11 ms).
    """
    (kh, kw), (ph, pw) = layer.kernel_size, layer.padding
    n, c = a.shape[:2]
    padded = F.pad(a, (pw, pw, ph, ph)) if ph or pw else a
    patches = padded.unfold(2, kh, 1).unfold(3, kw, 1)  # [N, C, H', W', kh, kw], a view
    return patches.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, -1)


def _conv_input_grad(
    layer: nn.Conv2d, weight: torch.Tensor, g: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """Returns the gradient at a convolution's input [N, C, H, W]: Wᵀ gᵢₜ for every output position,
    folded back onto the input (the adjoint of `F.unfold`).

    Not cuDNN's backward-data kernel: the fastest of those adds with atomics, in an order that
    changes from run to run, and a spec and seed must give the same numbers on the same GPU. The
    fold gathers each input pixel's terms in a fixed order.
    """
    n, out = g.shape[:2]
    columns = torch.matmul(weight.reshape(out, -1).t(), g.reshape(n, out, -1))  # [N, C·kh·kw, T]
    return F.fold(columns, tuple(size), layer.kernel_size, padding=layer.padding)


def squared_norms(parts: list[Part]) -> torch.Tensor:
    """Returns each sample's squared whole-gradient norm, [N]: ghost norms for linear layers,
    the materialised gradients' for convolutions."""
    total = None
    for part in parts:
        if isinstance(part, Outer):
            a_sq = torch.linalg.vector_norm(part.a, dim=1).square_()
            if part.names[1]:
                a_sq += 1.0
            term = a_sq.mul_(torch.linalg.vector_norm(part.g, dim=1).square_())
        else:
            term = torch.linalg.vector_norm(part.weight, dim=(1, 2)).square_()
            if part.bias is not None:
                term += torch.linalg.vector_norm(part.bias, dim=1).square_()
        total = term if total is None else total.add_(term)
    return total


def weighted_sum_into(parts: list[Part], factors: torch.Tensor, views: Mapping[str, torch.Tensor]) -> None:
    """Writes Σᵢ cᵢ ∇ℓᵢ of each silo into `views` (of an [s, P] output), with ``factors`` cᵢ
    [s, b] for the parts' N = s·b samples in silo-major order. Scales the parts' gᵢ in place."""
    silos, size = factors.shape
    for part in parts:
        weight, bias = part.names
        if isinstance(part, Outer):
            g = part.g.mul_(factors.reshape(-1, 1)).view(silos, size, -1)
            total = torch.bmm(g.transpose(1, 2), part.a.reshape(silos, size, -1))
            views[weight].copy_(total.view(views[weight].shape))
            if bias:
                views[bias].copy_(g.sum(dim=1))
        else:
            c = factors.unsqueeze(1)  # [s, 1, b]
            total = torch.bmm(c, part.weight.reshape(silos, size, -1))
            views[weight].copy_(total.view(views[weight].shape))
            if bias:
                views[bias].copy_(torch.bmm(c, part.bias.view(silos, size, -1)).view(views[bias].shape))


def materialise_into(parts: list[Part], views: Mapping[str, torch.Tensor]) -> None:
    """Writes every sample's gradient into `views` (of an [N, P] output)."""
    for part in parts:
        weight, bias = part.names
        if isinstance(part, Outer):
            torch.mul(part.g.unsqueeze(2), part.a.unsqueeze(1), out=views[weight])
            if bias:
                views[bias].copy_(part.g)
        else:
            views[weight].copy_(part.weight.view(views[weight].shape))
            if bias:
                views[bias].copy_(part.bias)


def clipped_sum(
    stack: ConvStack,
    layout: ParamLayout,
    flat_params: torch.Tensor,
    batch: SiloBatch,
    factors_of: FactorsOf,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (each silo's Σᵢ cᵢ ∇ℓᵢ [S, P], each sample's norm ‖∇ℓᵢ‖ [S, B]).

    ``flat_params`` is [P] (one pass over every silo's samples) or [S, P] (a pass per silo);
    ``factors_of(norms, mask)`` gives the cᵢ [S, B] of norms [S, B], 0 for padding.
    """
    total = torch.empty(batch.num_silos, layout.size, dtype=flat_params.dtype, device=batch.x.device)
    norms = torch.empty(batch.num_silos, batch.batch_size, dtype=flat_params.dtype, device=batch.x.device)
    for rows, parts in _passes(stack, layout, flat_params, batch):
        norms[rows] = squared_norms(parts).sqrt_().view(norms[rows].shape)
        factors = factors_of(norms[rows], batch.mask[rows])
        weighted_sum_into(parts, factors, layout.unflatten(total[rows]))
    return total, norms


def per_sample(
    stack: ConvStack, layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch
) -> torch.Tensor:
    """Returns every sample's gradient [S, B, P] (zero rows for padding), ``flat_params`` as in
    `clipped_sum`."""
    out = torch.empty(
        batch.num_silos, batch.batch_size, layout.size, dtype=flat_params.dtype, device=batch.x.device
    )
    for rows, parts in _passes(stack, layout, flat_params, batch):
        materialise_into(parts, layout.unflatten(out[rows].view(-1, layout.size)))
    return out


def _passes(
    stack: ConvStack, layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch
) -> Iterator[tuple[slice, list[Part]]]:
    """Yields (silos, their parts): all silos at once for shared parameters,
    else one silo at a time (each its own dense pass at its own model)."""
    shared = flat_params.dim() == 1
    groups = [slice(0, batch.num_silos)] if shared else [slice(s, s + 1) for s in range(batch.num_silos)]
    for rows in groups:
        params = flat_params if shared else flat_params[rows.start]
        x = batch.x[rows].flatten(0, 1)
        if stack.lead is not None:
            x = stack.lead(x)
        weight = batch.mask[rows].reshape(-1).to(flat_params.dtype)
        named = layout.unflatten(params.detach())
        yield rows, sample_parts(stack, named, x, batch.y[rows].reshape(-1), weight)

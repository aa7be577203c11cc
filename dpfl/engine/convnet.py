"""Convolutional stacks: each row's gradient of its weighted loss, passes written out.

`mean_grad` needs, for every row (a silo, a user–silo pair), the gradient of Σᵢ wᵢ ℓᵢ at that
row's own parameters. For models made of `nn.Conv2d`, 2×2 `nn.MaxPool2d`, elementwise
activations, `nn.Flatten` and `nn.Linear` (``cnn``, ``lenet``), this module computes it with
both passes written out, one row at a time, instead of ``vmap`` over rows of ``grad``
(`evaluate` takes its forward pass, `logits`, for the pools):

- ``vmap`` turns convolutions with per-row weights into one grouped convolution plus layout
  copies, which on CPU runs slower than a dense convolution per row; a row's dense
  convolution over its minibatch is the fastest kernel there is for it, so the rows are
  visited in turn and each row's activations stay in the cache;
- PyTorch's CPU `max_pool2d` takes about ten times as long as the elementwise maxima of the
  window's four strided views (2.3 ms against 0.21 ms for 64 MNIST images × 10 channels at
  24 × 24, one thread): the pool here is the latter, and it passes the gradient to the first
  maximum of each window in row-major order, as `max_pool2d` does;
- a convolution's input and weight gradients are asked for in two calls: oneDNN's combined
  backward took longer than the two apart (4.1 ms against 2.8 ms for the CNN's second layer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import passes
from dpfl.engine.batch import SiloBatch
from dpfl.engine.params import ParamLayout

__all__ = ["ConvStack", "conv_stack", "logits", "loss_grads"]

_aten = torch.ops.aten
_WINDOW = ((0, 0), (0, 1), (1, 0), (1, 1))  # a 2×2 window's positions in row-major order


@dataclass(frozen=True)
class ConvStack:
    """A model seen as convolutions, 2×2 max-pools, activations, flattens and linear layers.

    Attributes:
        lead: a leading `nn.Unflatten` that makes grey images [B, H, W] into [B, 1, H, W], or
            None when samples already are images.
        layers: the layers after it.
        weights: per layer, the (weight name, bias name or None) in the layout, or None for
            a layer without parameters.
    """

    lead: nn.Unflatten | None
    layers: tuple[nn.Module, ...]
    weights: tuple[tuple[str, str | None] | None, ...]


def conv_stack(model: nn.Module) -> ConvStack | None:
    """Returns the model as a `ConvStack`, or None when it holds a layer this module cannot
    differentiate (any other layer, a strided or grouped convolution, a pool other than 2×2
    with stride 2, a convolution or pool after the `nn.Flatten`, a linear layer before it; or
    what `passes.layers_of` refuses), no convolution at all, or a parameter that is not one of its
    layers' weights and biases (`passes.covers_every_parameter`)."""
    children = passes.layers_of(model)
    if children is None:
        return None
    lead = children.pop(0)[1] if children and type(children[0][1]) is nn.Unflatten else None
    if lead is not None and lead.dim != 1:
        return None
    layers, weights, flat = [], [], False
    for name, layer in children:
        kind = type(layer)
        if (kind is nn.Conv2d and not flat and _plain_conv(layer)) or (kind is nn.Linear and flat):
            weights.append((f"{name}.weight", f"{name}.bias" if layer.bias is not None else None))
        elif (kind is nn.MaxPool2d and not flat and _plain_pool(layer)) or kind in passes.ACTIVATIONS:
            weights.append(None)
        elif kind is nn.Flatten and not flat and layer.start_dim == 1 and layer.end_dim == -1:
            weights.append(None)
            flat = True
        else:
            return None
        layers.append(layer)
    if not any(type(layer) is nn.Conv2d for layer in layers) or type(layers[-1]) is not nn.Linear:
        return None
    if not passes.covers_every_parameter(model, weights):
        return None
    return ConvStack(lead, tuple(layers), tuple(weights))


def _plain_conv(conv: nn.Conv2d) -> bool:
    return (
        conv.stride == (1, 1)
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and conv.padding_mode == "zeros"
        and not isinstance(conv.padding, str)
    )


def _plain_pool(pool: nn.MaxPool2d) -> bool:
    def pair(value: int | tuple[int, ...]) -> tuple[int, ...]:
        return (value, value) if isinstance(value, int) else tuple(value)

    return (
        pair(pool.kernel_size) == (2, 2)
        and pair(pool.stride) == (2, 2)
        and pair(pool.padding) == (0, 0)
        and pair(pool.dilation) == (1, 1)
        and not pool.ceil_mode
        and not pool.return_indices
    )


def loss_grads(
    stack: ConvStack, layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch, weights: torch.Tensor
) -> torch.Tensor:
    """Returns ∇ Σᵢ wᵢ ℓᵢ per row, [S, P], with ``weights`` wᵢ [S, B] (0 for padding).

    ``flat_params`` is [S, P] (one model per row) or [P] (one model for every row). A row's
    padding is left out of its passes, as a loop's smaller last minibatch leaves it out (3.7 %
    of the samples of ULDP-AVG's MNIST steps with 100 users).
    """
    out = torch.zeros(batch.num_silos, layout.size, dtype=flat_params.dtype)
    views = layout.unflatten(out)
    shared = flat_params.dim() == 1
    params = layout.unflatten(flat_params.detach())
    counts = batch.mask.sum(1).tolist()
    with torch.no_grad():
        for row, count in enumerate(counts):
            if count == 0:
                continue
            real = batch.mask[row]
            # Real samples usually come first (`SiloBatch.from_indices`, an epoch's order).
            take = slice(0, count) if bool(real[:count].all()) else real.nonzero().squeeze(1)
            own = params if shared else {name: tensor[row] for name, tensor in params.items()}
            x = batch.x[row, take] if stack.lead is None else stack.lead(batch.x[row, take])
            grads = _row_grads(stack, own, x, batch.y[row, take], weights[row, take].to(out.dtype))
            for name, grad in grads.items():
                views[name][row] = grad
    return out


def logits(stack: ConvStack, params: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Returns one model's logits [B, classes] on samples x [B, ...] (the model's forward)."""
    with torch.no_grad():
        return _forward(stack, params, x if stack.lead is None else stack.lead(x), None)


def _forward(
    stack: ConvStack, params: Mapping[str, torch.Tensor], x: torch.Tensor, saved: list[object] | None
) -> torch.Tensor:
    """Returns the logits of images x, a tensor of their own; appends to `saved`, if given,
    what each layer's backward needs."""
    a, owned = x, False  # whether `a` is ours to overwrite (never the caller's records)
    for layer, names in zip(stack.layers, stack.weights, strict=True):
        held: object = a
        if isinstance(layer, nn.Conv2d):
            a = F.conv2d(a, params[names[0]], params[names[1]] if names[1] else None, padding=layer.padding)
            owned = True
        elif isinstance(layer, nn.Linear):
            a = F.linear(a, params[names[0]], params[names[1]] if names[1] else None)
            owned = True
        elif isinstance(layer, nn.MaxPool2d):
            a, held = _pool(a, choices=saved is not None)
            owned = True
        elif isinstance(layer, nn.Flatten):
            held = a.shape
            a = a.flatten(1)
        elif passes.in_place(layer):
            a = held = passes.activate(layer, a if owned else a.clone())
            owned = saved is None  # the backward pass needs this output as it is
        else:
            a = layer(a)
            owned = True
        if saved is not None:
            saved.append(held)
    return a if owned else a.clone()


def _row_grads(
    stack: ConvStack, params: Mapping[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Returns one model's gradient of Σᵢ wᵢ ℓᵢ over its minibatch x [B, ...], by name."""
    saved: list[object] = []  # per layer: what its backward needs
    g = passes.cross_entropy_grad_(_forward(stack, params, x, saved), y, w)
    grads: dict[str, torch.Tensor] = {}
    first = next(k for k, names in enumerate(stack.weights) if names is not None)
    for k in range(len(stack.layers) - 1, first - 1, -1):
        layer, names, held = stack.layers[k], stack.weights[k], saved[k]
        if isinstance(layer, nn.Linear):
            grads[names[0]] = g.t() @ held
            if names[1]:
                grads[names[1]] = g.sum(0)
            if k > first:
                g = g @ params[names[0]]
        elif isinstance(layer, nn.Conv2d):
            weight = params[names[0]]
            conv = (g, held, weight, None, (1, 1), layer.padding, (1, 1), False, (0, 0), 1)
            _, grads[names[0]], bias = _aten.convolution_backward(*conv, (False, True, names[1] is not None))
            if names[1]:
                grads[names[1]] = bias
            if k > first:
                g = _aten.convolution_backward(*conv, (True, False, False))[0]
        elif isinstance(layer, nn.MaxPool2d):
            g = _pool_backward(g, *held)
        elif isinstance(layer, nn.Flatten):
            g = g.view(held)
        else:
            g = passes.activation_backward(layer, g, held)
    return grads


def _pool(x: torch.Tensor, *, choices: bool) -> tuple[torch.Tensor, tuple | None]:
    """Returns the 2×2 max-pool of x [B, C, H, W] and, with `choices`, what its backward needs.

    An odd last row or column is left out, as `max_pool2d` (no ceil mode) leaves it. Ties go
    to the window's first position in row-major order, as `max_pool2d` sends them, for finite
    inputs (a window of −∞ or NaN may send its gradient elsewhere): a ≥ b, c ≥ d, then
    top ≥ bottom. Each comparison is a difference compared with 0 in place, 1.0 or 0.0: on
    CPU a comparison of strided views into floats, or into booleans turned into floats later,
    costs several times as much.
    """
    height, width = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    a, b, c, d = (x[..., i:height:2, j:width:2] for i, j in _WINDOW)
    top, bottom = torch.maximum(a, b), torch.maximum(c, d)
    pooled = torch.maximum(top, bottom)
    if not choices:
        return pooled, None
    return pooled, (x.shape, torch.sub(a, b).ge_(0), torch.sub(c, d).ge_(0), torch.sub(top, bottom).ge_(0))


def _pool_backward(
    g: torch.Tensor, shape: torch.Size, a_won: torch.Tensor, c_won: torch.Tensor, top_won: torch.Tensor
) -> torch.Tensor:
    """Returns the gradient at the pool's input [B, C, H, W], each window's to its maximum."""
    height, width = shape[-2] // 2 * 2, shape[-1] // 2 * 2
    # an odd last row or column took no part: its gradient is zero
    odd = (height, width) != tuple(shape[-2:])
    out = (torch.zeros if odd else torch.empty)(shape, dtype=g.dtype, device=g.device)
    a, b, c, d = (out[..., i:height:2, j:width:2] for i, j in _WINDOW)
    top = g * top_won
    torch.mul(top, a_won, out=a)
    torch.sub(top, a, out=b)
    bottom = g.sub_(top)  # the incoming gradient is not needed any more
    torch.mul(bottom, c_won, out=c)
    torch.sub(bottom, c, out=d)
    return out

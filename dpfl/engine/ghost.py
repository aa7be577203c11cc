"""Ghost clipping: clipped per-sample gradient sums without per-sample gradients.

Applies to models that are an `nn.Sequential` of `nn.Linear` layers and elementwise
activations (``logreg``, ``mlp``). For a linear layer z = W a + b and the loss ℓᵢ of sample
i, the per-sample gradients are outer products (Goodfellow 2015, "Efficient per-example
gradient computations"):

    ∇_W ℓᵢ = gᵢ aᵢᵀ,   ∇_b ℓᵢ = gᵢ,   where gᵢ = ∂ℓᵢ/∂zᵢ,

so ‖∇_W ℓᵢ‖²_F = ‖aᵢ‖²·‖gᵢ‖² and the squared norm of sample i's whole flattened gradient is
Σ_layers (‖aᵢ‖² + 1)·‖gᵢ‖² (Li et al. 2022, "Large language models can be strong
differentially private learners", §4, for inputs without a sequence dimension). One forward
pass and one backward pass to the layer outputs give every aᵢ and gᵢ; the clipped sum
Σᵢ cᵢ gᵢ aᵢᵀ is then one batched matrix product per layer (the reweighted backward of the
loss Σᵢ cᵢ ℓᵢ, done directly because the gᵢ are already known — the "book-keeping" of Bu et
al. 2023). Nothing of size [S, B, P] is ever allocated.

Both passes are written out rather than left to autograd: they run in place where they can,
because on CPU every fresh multi-megabyte tensor costs page faults, and at the sizes of a
federated round those cost as much as the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from dpfl.engine import passes
from dpfl.engine.batch import SiloBatch
from dpfl.engine.params import ParamLayout

__all__ = ["LinearStack", "linear_stack"]


@dataclass(frozen=True)
class LinearStack:
    """A model seen as linear layers and elementwise activations, with parameter positions.

    Attributes:
        layers: the model's layers after any leading `nn.Flatten`.
        weights: per layer, the (weight name, bias name or None) in the layout, or None for
            an activation.
    """

    layers: tuple[nn.Module, ...]
    weights: tuple[tuple[str, str | None] | None, ...]


def linear_stack(model: nn.Module) -> LinearStack | None:
    """Returns the model as a `LinearStack`, or None when ghost clipping does not apply."""
    children = passes.layers_of(model)
    if children is None:
        return None
    while children and type(children[0][1]) is nn.Flatten:
        flatten = children.pop(0)[1]
        if flatten.start_dim != 1 or flatten.end_dim != -1:
            return None
    layers, weights = [], []
    for name, layer in children:
        if type(layer) is nn.Linear:
            weights.append((f"{name}.weight", f"{name}.bias" if layer.bias is not None else None))
        elif type(layer) in passes.ACTIVATIONS:
            weights.append(None)
        else:
            return None
        layers.append(layer)
    if not any(w is not None for w in weights) or not passes.covers_every_parameter(model, weights):
        return None
    return LinearStack(tuple(layers), tuple(weights))


def bytes_per_sample(stack: LinearStack) -> int:
    """Returns a generous estimate of the working memory one sample needs, in bytes."""
    linears = [layer for layer in stack.layers if isinstance(layer, nn.Linear)]
    return 4 * 4 * sum(layer.in_features + layer.out_features for layer in linears)


def output_grads(
    stack: LinearStack, layout: ParamLayout, flat_params: torch.Tensor, batch: SiloBatch
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Returns each linear layer's inputs aᵢ [S, B, in] and loss gradients gᵢ [S, B, out].

    ``flat_params`` is [S, P] (one model per silo) or [P] (one model shared by all silos; each
    layer is then one plain matrix product over all S·B samples). gᵢ is the gradient of sample
    i's own cross-entropy loss; masked samples get gᵢ = 0 exactly.
    """
    return layer_grads(stack, layout.unflatten(flat_params.detach()), batch, shared=flat_params.dim() == 1)


def layer_grads(
    stack: LinearStack, params: Mapping[str, torch.Tensor], batch: SiloBatch, *, shared: bool
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """`output_grads` with the parameters by name: [S, *shape] each, or [*shape] if `shared`."""
    num_silos, size = batch.num_silos, batch.batch_size
    # Shared parameters: fold silos into the sample dimension for one large GEMM per layer.
    a = batch.x.reshape(num_silos * size, -1) if shared else batch.x.reshape(num_silos, size, -1)
    owned = False  # whether `a` is ours to overwrite (never the caller's features)
    inputs: list[torch.Tensor] = []
    saved: list[torch.Tensor | None] = []  # per layer: what its backward needs
    with torch.no_grad():
        for layer, names in zip(stack.layers, stack.weights, strict=True):
            if names is not None:
                inputs.append(a)
                saved.append(None)
                a = _linear(a, params[names[0]], params[names[1]] if names[1] else None, shared)
                owned = True
            elif passes.in_place(layer):
                a = passes.activate(layer, a if owned else a.clone())
                saved.append(a)
                owned = False  # the backward pass needs this output as it is
            else:
                saved.append(a)
                a = layer(a)
                owned = True
        # Unless a trailing activation's backward needs them, the logits are not needed any
        # more: their gradient overwrites them.
        logits = (a if owned else a.clone()).reshape(num_silos * size, -1)
        weight = batch.mask.reshape(-1).to(logits.dtype)
        g = passes.cross_entropy_grad_(logits, batch.y.reshape(-1), weight).view_as(a)
        grads: list[torch.Tensor] = []
        first_linear = next(k for k, names in enumerate(stack.weights) if names is not None)
        for k in range(len(stack.layers) - 1, first_linear - 1, -1):
            layer, names = stack.layers[k], stack.weights[k]
            if names is None:
                g = passes.activation_backward(layer, g, saved[k])
                continue
            grads.append(g)
            if k > first_linear:
                weight_k = params[names[0]]
                g = g @ weight_k if shared else torch.bmm(g, weight_k)
    grads.reverse()
    shape = (num_silos, size)
    return [t.reshape(*shape, -1) for t in inputs], [g.reshape(*shape, -1) for g in grads]


def _linear(a: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, shared: bool) -> torch.Tensor:
    if shared:
        return torch.addmm(bias, a, weight.t()) if bias is not None else a @ weight.t()
    if bias is not None:
        return torch.baddbmm(bias.unsqueeze(1), a, weight.transpose(1, 2))
    return torch.bmm(a, weight.transpose(1, 2))


def squared_norms(inputs: list[torch.Tensor], grads: list[torch.Tensor], stack: LinearStack) -> torch.Tensor:
    """Returns each sample's squared whole-gradient norm Σ_layers (‖aᵢ‖² + [bias])·‖gᵢ‖², [S, B]."""
    total = torch.zeros(grads[0].shape[:2], dtype=grads[0].dtype)
    names = [w for w in stack.weights if w is not None]
    for a, g, (_, bias) in zip(inputs, grads, names, strict=True):
        a_sq = torch.linalg.vector_norm(a, dim=-1).square_()
        if bias is not None:
            a_sq += 1.0
        total += a_sq.mul_(torch.linalg.vector_norm(g, dim=-1).square_())
    return total


def weighted_sum_(
    inputs: list[torch.Tensor],
    grads: list[torch.Tensor],
    factors: torch.Tensor,
    stack: LinearStack,
    layout: ParamLayout,
) -> torch.Tensor:
    """Returns Σᵢ cᵢ ∇ℓᵢ per silo as [S, P], with ``factors`` cᵢ [S, B]: one bmm per layer.

    Scales ``grads`` in place (they are not needed afterwards).
    """
    num_silos = factors.shape[0]
    out = torch.empty(num_silos, layout.size, dtype=grads[0].dtype)
    views = layout.unflatten(out)
    names = [w for w in stack.weights if w is not None]
    scale = factors.unsqueeze(-1)
    for a, g, (weight, bias) in zip(inputs, grads, names, strict=True):
        g *= scale
        # The views of [S, P] are strided over silos, so bmm writes a temporary that is copied.
        views[weight].copy_(torch.bmm(g.transpose(1, 2), a))
        if bias is not None:
            views[bias].copy_(g.sum(dim=1))
    return out

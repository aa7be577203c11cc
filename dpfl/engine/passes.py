"""Layer passes shared by the gradients written out by hand (`ghost`, `convnet`): elementwise
activations forward and backward, and the cross-entropy's gradient at the logits."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ACTIVATIONS",
    "activate",
    "activation_backward",
    "covers_every_parameter",
    "cross_entropy_grad_",
    "in_place",
    "layers_of",
]

_aten = torch.ops.aten

# Activations whose derivative follows from their output y, so the forward pass can overwrite
# its input and the backward pass its incoming gradient g (the kernels autograd itself uses).
_IN_PLACE: dict[type[nn.Module], tuple[Callable | None, Callable]] = {
    nn.ReLU: (torch.relu_, lambda m, g, y: _aten.threshold_backward.grad_input(g, y, 0, grad_input=g)),
    nn.Tanh: (torch.tanh_, lambda m, g, y: _aten.tanh_backward.grad_input(g, y, grad_input=g)),
    nn.Sigmoid: (torch.sigmoid_, lambda m, g, y: _aten.sigmoid_backward.grad_input(g, y, grad_input=g)),
    nn.LeakyReLU: (
        None,  # forward below, as it needs the module's slope
        lambda m, g, y: _aten.leaky_relu_backward.grad_input(g, y, m.negative_slope, True, grad_input=g),
    ),
    nn.Identity: (None, lambda m, g, y: g),
}
# Other elementwise activations hold no parameters either, but their derivative needs the
# input: they keep it, and their backward goes through `torch.func.vjp`.
ACTIVATIONS = (*_IN_PLACE, nn.ELU, nn.GELU, nn.SiLU, nn.Softplus)


def layers_of(model: nn.Module) -> list[tuple[str, nn.Module]] | None:
    """Returns a plain `nn.Sequential`'s layers in order, by name, or None when passes written
    out layer by layer cannot stand in for its forward.

    None for: another container or a subclass (its forward may differ), a buffer, a hook, a
    layer object used twice (`named_children` lists it once, and tied weights would need their
    gradients summed), or an activation outside the in-place table that would overwrite the
    input its backward needs (``inplace=True``). Callers match layers by exact type, so a
    subclass with a forward of its own is never mistaken for its base.
    """
    if type(model) is not nn.Sequential or any(True for _ in model.buffers()):
        return None
    children = list(model._modules.items())
    if len({id(layer) for _, layer in children}) != len(children):
        return None
    for module in (model, *(layer for _, layer in children)):
        if module is None or any(
            getattr(module, hooks)
            for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
        ):
            return None
    if any(getattr(layer, "inplace", False) and not in_place(layer) for _, layer in children):
        return None
    return children


def covers_every_parameter(model: nn.Module, weights: Sequence[tuple[str, str | None] | None]) -> bool:
    """Returns whether the layers' (weight, bias) names are the model's parameters, each once.

    The written-out passes fill a sum or a per-sample gradient [.., P] name by name in a tensor
    from `torch.empty`: a parameter they never name (the Sequential's own, an extra one registered
    on a layer, or one tied between two layers, which `named_parameters` lists once) would keep
    uninitialised memory in its slot of a clipped sum and be left out of the norm it is clipped by.
    """
    named = [name for pair in weights if pair is not None for name in pair if name is not None]
    return len(set(named)) == len(named) and set(named) == {name for name, _ in model.named_parameters()}


def in_place(layer: nn.Module) -> bool:
    """Returns whether the activation's derivative follows from its output alone."""
    # A negative leaky slope maps negative inputs to positive outputs: the output's sign no
    # longer tells which branch was taken.
    return type(layer) in _IN_PLACE and not (isinstance(layer, nn.LeakyReLU) and layer.negative_slope < 0)


def activate(layer: nn.Module, a: torch.Tensor) -> torch.Tensor:
    """Applies an `_IN_PLACE` activation to ``a`` in place."""
    forward = _IN_PLACE[type(layer)][0]
    if forward is not None:
        return forward(a)
    if isinstance(layer, nn.LeakyReLU):
        return F.leaky_relu_(a, layer.negative_slope)
    return a  # nn.Identity


def activation_backward(layer: nn.Module, g: torch.Tensor, saved: torch.Tensor) -> torch.Tensor:
    """Returns the gradient at the activation's input; ``saved`` is its output or input."""
    if in_place(layer):
        return _IN_PLACE[type(layer)][1](layer, g, saved)
    with torch.enable_grad():
        _, vjp = torch.func.vjp(layer, saved)
        return vjp(g)[0]


def cross_entropy_grad_(logits: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Overwrites logits z [N, C] with wᵢ·∂CE(zᵢ, yᵢ)/∂zᵢ = wᵢ·(softmax(zᵢ) − onehot(yᵢ)).

    Written out because PyTorch's CPU (log-)softmax over a short last dimension is several
    times slower than these few elementwise operations, and the loss value is not needed.
    """
    logits -= logits.amax(dim=1, keepdim=True)
    probs = logits.exp_()
    probs *= (weight / probs.sum(dim=1)).unsqueeze(1)
    return probs.scatter_add_(1, labels.unsqueeze(1), -weight.unsqueeze(1))

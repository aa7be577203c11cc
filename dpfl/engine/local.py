"""Local SGD of many models at once: each row's model steps on its own minibatches.

FedAvg's silos, DP-FedAvg's agents and ULDP-AVG's (silo, user) pairs all train their own copy
of the model for a few plain SGD steps before anything is clipped or released; this is that
training, for G copies as one batched computation a step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from dpfl.engine import ghost
from dpfl.engine.batch import SiloBatch
from dpfl.engine.grads import mean_grad
from dpfl.engine.params import ParamLayout, stack_copies

__all__ = ["sgd_steps"]


def sgd_steps(
    model: nn.Module,
    layout: ParamLayout,
    start: torch.Tensor,
    rows: int,
    steps: Iterable[tuple[int, SiloBatch]],
    *,
    lr: float,
    momentum: float = 0.0,
) -> torch.Tensor:
    """Returns `rows` models [rows, P] after minibatch SGD from `start`, with heavy-ball
    `momentum` μ if given (v ← μv + g, w ← w − ηv, v = 0 at the start).

    `start` is one model [P] for every row or each row's own [rows, P] (not modified). Each
    step (active, batch) steps the first `active` rows on the mean loss over their real records
    in `batch` ([active, B]); a row without a real record takes a zero gradient.

    A stack of linear layers (`ghost.linear_stack`) keeps each layer's weights of every row in
    one contiguous tensor and steps it in place, the product of each layer's inputs and
    gradients fused with the update (`baddbmm_`): the flat gradient `mean_grad` returns would
    cost five more passes over [rows, P] a step, as much time as the products themselves on the
    MNIST MLP. Other models step the flat parameters by `mean_grad`.
    """
    stack = ghost.linear_stack(model)
    if stack is None:
        local = stack_copies(start, rows) if start.dim() == 1 else start.clone()
        velocity = torch.zeros_like(local) if momentum else None
        for active, batch in steps:
            g = mean_grad(model, layout, local[:active], batch)
            if velocity is not None:
                g = velocity[:active].mul_(momentum).add_(g)
            local[:active] -= lr * g
        return local
    layers = {  # each row's own copy, contiguous per layer
        name: view.expand(rows, *view.shape) if start.dim() == 1 else view
        for name, view in layout.unflatten(start).items()
    }
    layers = {name: view.clone(memory_format=torch.contiguous_format) for name, view in layers.items()}
    linears = [names for names in stack.weights if names is not None]
    velocity = {name: torch.zeros_like(tensor) for name, tensor in layers.items()} if momentum else None
    for active, batch in steps:
        current = {name: tensor[:active] for name, tensor in layers.items()}
        inputs, grads = ghost.layer_grads(stack, current, batch, shared=False)
        # the gradient of each row's mean loss over its real records: weights mask / count
        factors = (batch.mask / batch.mask.sum(1, keepdim=True).clamp(min=1)).to(start.dtype).unsqueeze(-1)
        for a, g, (weight, bias) in zip(inputs, grads, linears, strict=True):
            g *= factors
            if velocity is None:
                current[weight].baddbmm_(g.transpose(1, 2), a, alpha=-lr)
                if bias is not None:
                    current[bias].sub_(g.sum(dim=1), alpha=lr)
                continue
            v = velocity[weight][:active].baddbmm_(g.transpose(1, 2), a, beta=momentum)
            current[weight].sub_(v, alpha=lr)
            if bias is not None:
                current[bias].sub_(velocity[bias][:active].mul_(momentum).add_(g.sum(dim=1)), alpha=lr)
    return layout.flatten(layers)

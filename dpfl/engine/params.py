"""Flat parameter vectors: one model's parameters as a 1-D tensor, and S copies as [S, P].

The engine keeps parameters flat because everything privacy does — clipping the whole
per-sample gradient, adding isotropic Gaussian noise, averaging over silos — is defined on the
flattened vector. `ParamLayout` records where each named tensor lives in that vector, so a
flat vector (or a stack of them) turns back into the dict that `torch.func.functional_call`
expects, as views that share its memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["ParamLayout", "stack_copies"]


@dataclass(frozen=True)
class ParamLayout:
    """Where each named parameter sits in a flat vector of ``size`` entries.

    Attributes:
        names: parameter names in `nn.Module.named_parameters` order.
        shapes: shape of each parameter.
        offsets: index of each parameter's first entry in the flat vector.
        size: total number of entries P.
    """

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    offsets: tuple[int, ...]
    size: int

    @classmethod
    def of(cls, model: nn.Module) -> ParamLayout:
        """Returns the layout of ``model``'s parameters, in `named_parameters` order."""
        names, shapes, offsets = [], [], []
        offset = 0
        for name, param in model.named_parameters():
            names.append(name)
            shapes.append(param.shape)
            offsets.append(offset)
            offset += param.numel()
        return cls(tuple(names), tuple(shapes), tuple(offsets), offset)

    def numels(self) -> tuple[int, ...]:
        """Returns the number of entries of each parameter."""
        return tuple(shape.numel() for shape in self.shapes)

    def flatten(self, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Returns ``params`` as one new tensor [*lead, P].

        Each value may carry the same leading dimensions ``lead`` before its own shape
        (e.g. [S, *shape] for a stack of silos, [S, B, *shape] for per-sample gradients).
        """
        first = params[self.names[0]]
        lead = first.shape[: first.dim() - len(self.shapes[0])]
        return torch.cat([params[n].reshape(*lead, -1) for n in self.names], dim=-1)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Returns a dict of views [*lead, *shape] into ``flat`` [*lead, P] (no copies).

        Writing into a view writes into ``flat``; autograd flows from the views to ``flat``.
        """
        if flat.shape[-1] != self.size:
            raise ValueError(
                f"flat parameters must have {self.size} entries in the last dimension; "
                f"got shape {tuple(flat.shape)}"
            )
        lead = flat.shape[:-1]
        return {
            name: flat.narrow(-1, offset, shape.numel()).view(*lead, *shape)
            for name, shape, offset in zip(self.names, self.shapes, self.offsets, strict=True)
        }

    def flatten_module(self, model: nn.Module) -> torch.Tensor:
        """Returns a detached copy of ``model``'s parameters as one vector [P]."""
        with torch.no_grad():
            return self.flatten(dict(model.named_parameters())).detach()

    def load_into(self, model: nn.Module, flat: torch.Tensor) -> None:
        """Copies a flat vector [P] into ``model``'s parameters, in place."""
        views = self.unflatten(flat)
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(views[name])


def stack_copies(flat: torch.Tensor, num_copies: int) -> torch.Tensor:
    """Returns ``num_copies`` independent copies of a flat vector [P], stacked as [S, P].

    The copies own their memory, so silos can then diverge (local steps). For read-only use
    ``flat.expand(num_copies, -1)`` instead, which copies nothing.
    """
    if flat.dim() != 1:
        raise ValueError(f"expected a flat parameter vector [P]; got shape {tuple(flat.shape)}")
    return flat.unsqueeze(0).repeat(num_copies, 1)

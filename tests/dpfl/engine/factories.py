"""Small models, parameters and batches for the engine tests (plain functions)."""

import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch
from dpfl.models import build_model

# Small input shapes keep the per-sample reference loops fast.
CASES = {
    "logreg": {"input_shape": (6,)},
    "mlp": {"input_shape": (6,), "hidden": [5, 4]},
    "cnn": {"input_shape": (1, 16, 16)},
    "lenet": {"input_shape": (12, 12)},
    "cifar_cnn": {"input_shape": (3, 16, 16)},
    # residual blocks and GroupNorm, odd sides: the generic torch.func path
    "resnet_gn": {"input_shape": (2, 9, 7), "width": 4, "groups": 2},
}
NUM_CLASSES = 3


def model_and_layout(name: str, seed: int = 0) -> tuple[nn.Module, ParamLayout]:
    options = dict(CASES[name])
    shape = options.pop("input_shape")
    model = build_model(name, input_shape=shape, num_classes=NUM_CLASSES, seed=seed, **options)
    return model, ParamLayout.of(model)


def silo_params(model: nn.Module, layout: ParamLayout, num_silos: int, seed: int = 1) -> torch.Tensor:
    """Returns [S, P]: the model's parameters, perturbed differently for each silo."""
    gen = torch.Generator().manual_seed(seed)
    flat = layout.flatten_module(model)
    return flat + 0.3 * torch.randn(num_silos, layout.size, generator=gen) * flat.abs().mean()


def random_batch(name: str, num_silos: int, batch_size: int, seed: int = 2, scale: float = 1.0) -> SiloBatch:
    gen = torch.Generator().manual_seed(seed)
    shape = CASES[name]["input_shape"]
    x = scale * torch.randn(num_silos, batch_size, *shape, generator=gen)
    y = torch.randint(0, NUM_CLASSES, (num_silos, batch_size), generator=gen)
    return SiloBatch.full(x, y)


def loop_per_sample_grads(model: nn.Module, layout: ParamLayout, flat: torch.Tensor, batch: SiloBatch):
    """Returns [S, B, P] from one loss.backward() per sample: the slow reference."""
    out = torch.zeros(batch.num_silos, batch.batch_size, layout.size)
    for s in range(batch.num_silos):
        layout.load_into(model, flat[s] if flat.dim() == 2 else flat)
        for i in range(batch.batch_size):
            if not batch.mask[s, i]:
                continue
            model.zero_grad(set_to_none=True)
            F.cross_entropy(model(batch.x[s, i : i + 1]), batch.y[s, i : i + 1]).backward()
            out[s, i] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    return out


def unequal_batch(name: str, sizes: list[int], seed: int = 3, padding: float = 0.0) -> SiloBatch:
    """Returns a padded batch of silos with ``sizes`` real samples; padding holds ``padding``."""
    gen = torch.Generator().manual_seed(seed)
    shape = CASES[name]["input_shape"]
    total = sum(sizes)
    x = torch.randn(total, *shape, generator=gen)
    y = torch.randint(0, NUM_CLASSES, (total,), generator=gen)
    starts = torch.tensor([0, *sizes]).cumsum(0)
    batch = SiloBatch.from_indices(x, y, [torch.arange(starts[s], starts[s + 1]) for s in range(len(sizes))])
    if padding:
        x = batch.x.clone()
        x[~batch.mask] = padding
        batch = SiloBatch(x, batch.y, batch.mask)
    return batch

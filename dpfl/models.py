"""Small torch models written for `torch.func` (`functional_call`, `vmap`, `grad`).

Every model is a function of its parameters and its input: no BatchNorm (it mixes the
samples of a batch, so per-sample gradients would not be per sample), no buffers. Dropout is
allowed (``fraudnet``): in training mode it draws its masks from the global generator inside
`vmap` (``randomness="different"``, `dpfl.engine.grads`), which the runner forks and seeds from
the run's noise key and round (`dpfl.engine.noise.model_draws`), so a run's numbers still depend
only on its seed; evaluation and a voting agent's predictions run in eval mode, without dropout.
Models are looked up by name:

    model = build_model("mlp", input_shape=(50,), num_classes=10, hidden=[64], seed=0)

Inputs have shape ``[batch, *input_shape]``; outputs are logits ``[batch, num_classes]``.
Binary tasks use ``num_classes=2`` (softmax over two logits), so every model trains with the
same cross-entropy loss.

Initialisation reproduces PyTorch's default for `Linear` and `Conv2d` (weights and biases
uniform in ±1/√fan_in, i.e. Kaiming-uniform with a = √5) and `GroupNorm` (scale 1, shift 0),
but draws from a `torch.Generator` seeded with ``seed``: the global RNG is never read or
advanced.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from dpfl import resnet
from dpfl.errors import SpecError
from dpfl.registry import Registry

__all__ = ["MODELS", "ModelEntry", "build_model", "draws_randomness", "model_builder", "registered_models"]

ModelBuilder = Callable[..., nn.Module]


@dataclass(frozen=True)
class ModelEntry:
    """A registered model: its builder, and whether it reads image-shaped input.

    `images`: the model takes an image dataset's pixels as (H, W) rows, not flattened ones.
    """

    builder: ModelBuilder
    images: bool = False


MODELS: Registry[ModelEntry] = Registry(
    "model", lambda name, builder, images=False: ModelEntry(builder, images), field="model.name"
)
"""Every model, by name: ``@MODELS.register("cnn", images=True)`` above the builder registers it.

A builder takes ``input_shape`` and ``num_classes`` as keywords, then its own keyword-only
options, and builds the module on any device (`build_model` builds it on the meta device and
initialises it afterwards).
"""


def registered_models() -> list[str]:
    """Returns the registered model names, sorted."""
    return MODELS.names()


def model_builder(name: str) -> ModelBuilder:
    """Returns the builder registered under ``name`` (its docstring and keyword-only options describe it)."""
    return MODELS[name].builder


def build_model(
    name: str, *, input_shape: tuple[int, ...], num_classes: int, seed: int = 0, **options: object
) -> nn.Module:
    """Returns a freshly initialised model, the same for the same arguments and seed.

    Args:
        name: a registered model name (see `registered_models`).
        input_shape: shape of one sample, without the batch dimension.
        num_classes: number of logits; 2 for a binary task.
        seed: seed of the generator that draws the initial parameters.
        **options: the model's own options, e.g. ``hidden=[64]`` for ``mlp``.

    Raises:
        UnknownNameError: ``name`` is not registered.
        SpecError: a shape, class count or option is not allowed; the field is the spec's
            ``model.<option>`` (its options sit beside ``name``), ``model.name`` for inputs the
            model cannot take, or ``model.input_shape`` / ``model.num_classes``.
    """
    builder = model_builder(name)
    allowed = [p.name for p in inspect.signature(builder).parameters.values() if p.kind == p.KEYWORD_ONLY]
    for key in options:
        if key not in allowed:
            raise SpecError(
                f"model.{key}",
                f"is not an option of model {name!r}; allowed: {', '.join(allowed) or 'none'}.",
            )
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d < 1 for d in shape):
        raise SpecError(
            "model.input_shape", f"must be a non-empty tuple of positive sizes; got {input_shape!r}"
        )
    if int(num_classes) < 2:
        raise SpecError("model.num_classes", f"must be ≥ 2 (binary tasks use 2); got {num_classes}")
    # The global RNG is left as it was: PyTorch's default initialisation draws from it (then
    # `_initialise` overwrites every weight). Not the meta device: its first use imports sympy
    # (0.4 s of a CLI run).
    with torch.random.fork_rng(devices=[]):
        model = builder(shape, int(num_classes), **options)
    _initialise(model, torch.Generator().manual_seed(int(seed)))
    return model


def draws_randomness(model: nn.Module) -> bool:
    """Returns whether ``model`` in its current mode draws random numbers in its forward pass
    (a dropout layer with p > 0 in training mode)."""
    return model.training and any(
        isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()
    )


def _initialise(model: nn.Module, generator: torch.Generator) -> None:
    """Draws every weight and bias uniformly in ±1/√fan_in (PyTorch's default bounds); sets
    every GroupNorm to the identity's scale 1 and shift 0 (PyTorch's default, drawing nothing)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Conv2d):
                fan_in = module.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                module.weight.uniform_(-bound, bound, generator=generator)
                if module.bias is not None:
                    module.bias.uniform_(-bound, bound, generator=generator)
            elif isinstance(module, nn.GroupNorm):
                if module.affine:
                    module.weight.fill_(1.0)
                    module.bias.zero_()
            elif next(module.parameters(recurse=False), None) is not None:
                raise TypeError(f"no initialisation rule for {type(module).__name__}")


def _flat_size(input_shape: tuple[int, ...]) -> int:
    return math.prod(input_shape)


def _image_input(input_shape: tuple[int, ...], model: str) -> tuple[list[nn.Module], int, int, int]:
    """Returns (leading modules, channels, height, width) for an image model's input shape."""
    if len(input_shape) == 2:
        height, width = input_shape
        # Accept [B, H, W] grey images by adding the channel dimension inside the model.
        return [nn.Unflatten(1, (1, height))], 1, height, width
    if len(input_shape) == 3:
        channels, height, width = input_shape
        return [], channels, height, width
    raise SpecError(
        "model.name",
        f"must take the dataset's inputs: {model!r} needs images (H, W) or (C, H, W); got {input_shape}.",
    )


def _pooled(size: int, kernel: int, padding: int = 0) -> int:
    """Side length after a stride-1 convolution and a 2×2 max-pool."""
    return (size + 2 * padding - kernel + 1) // 2


@MODELS.register("logreg")
def _logreg(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Softmax (multinomial logistic) regression: one linear layer on the flattened input."""
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_size(input_shape), num_classes))


@MODELS.register("mlp")
def _mlp(input_shape: tuple[int, ...], num_classes: int, *, hidden: Sequence[int] = (64,)) -> nn.Module:
    """Multi-layer perceptron with ReLU; ``hidden`` lists the hidden widths (default [64]).

    The ISRL-DP paper's MNIST model is ``mlp`` on PCA-50 features with ``hidden=[64]``
    (reference/000_isrl_dp.md §6.2), without its dropout.
    """
    # A spec's options arrive as JSON or YAML: a string or a float here would be read digit by
    # digit or truncated, so only whole positive numbers are taken.
    if (
        isinstance(hidden, str | bytes)
        or not isinstance(hidden, Sequence)
        or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in hidden)
    ):
        raise SpecError("model.hidden", f"must list positive integer widths, e.g. [64]; got {hidden!r}.")
    widths = list(hidden)
    layers: list[nn.Module] = [nn.Flatten()]
    previous = _flat_size(input_shape)
    for width in widths:
        layers += [nn.Linear(previous, width), nn.ReLU()]
        previous = width
    layers.append(nn.Linear(previous, num_classes))
    return nn.Sequential(*layers)


@MODELS.register("cnn", images=True)
def _cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The ULDP-FL paper's MNIST CNN, ``CNNMnist`` (reference/004_uldp_fl.md §4.2).

    conv(C→10, 5×5) – maxpool 2 – ReLU – conv(10→20, 5×5) – maxpool 2 – ReLU – FC 320→50 –
    ReLU – FC 50→classes: 21,840 parameters on 1×28×28 inputs with 10 classes. The paper's
    Dropout2d and dropout layers are left out (see the module docstring).
    """
    lead, channels, height, width = _image_input(input_shape, "cnn")
    h, w = _pooled(_pooled(height, 5), 5), _pooled(_pooled(width, 5), 5)
    if h < 1 or w < 1:
        raise SpecError(
            "model.name",
            f"must take the dataset's inputs: 'cnn' needs images of at least 16×16; got {input_shape}.",
        )
    return nn.Sequential(
        *lead,
        nn.Conv2d(channels, 10, kernel_size=5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Conv2d(10, 20, kernel_size=5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(20 * h * w, 50),
        nn.ReLU(),
        nn.Linear(50, num_classes),
    )


@MODELS.register("cifar_cnn", images=True)
def _cifar_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The ISRL-DP paper's CIFAR-10 CNN, the PyTorch tutorial's net (reference/000_isrl_dp.md §6.3).

    conv(C→6, 5×5) – ReLU – maxpool 2 – conv(6→16, 5×5) – ReLU – maxpool 2 – FC 400→120 – ReLU –
    FC 120→84 – ReLU – FC 84→classes: 62,006 parameters on 3×32×32 inputs with 10 classes.
    """
    lead, channels, height, width = _image_input(input_shape, "cifar_cnn")
    h, w = _pooled(_pooled(height, 5), 5), _pooled(_pooled(width, 5), 5)
    if h < 1 or w < 1:
        raise SpecError(
            "model.name",
            f"must take the dataset's inputs: 'cifar_cnn' needs images of at least 16×16; got {input_shape}.",
        )
    return _lenet_stack(lead, channels, h * w, num_classes, padding=0)


@MODELS.register("lenet", images=True)
def _lenet(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LeNet-5 for 28×28 inputs (LeCun et al. 1998), with ReLU and max-pooling.

    conv(C→6, 5×5, pad 2) – ReLU – maxpool 2 – conv(6→16, 5×5) – ReLU – maxpool 2 –
    FC 400→120 – ReLU – FC 120→84 – ReLU – FC 84→classes: 61,706 parameters on 1×28×28
    inputs with 10 classes.
    """
    lead, channels, height, width = _image_input(input_shape, "lenet")
    h, w = _pooled(_pooled(height, 5, 2), 5), _pooled(_pooled(width, 5, 2), 5)
    if h < 1 or w < 1:
        raise SpecError(
            "model.name",
            f"must take the dataset's inputs: 'lenet' needs images of at least 12×12; got {input_shape}.",
        )
    return _lenet_stack(lead, channels, h * w, num_classes, padding=2)


def _lenet_stack(
    lead: list[nn.Module], channels: int, area: int, num_classes: int, *, padding: int
) -> nn.Sequential:
    """conv(C→6, 5×5, `padding`) – ReLU – maxpool 2 – conv(6→16, 5×5) – ReLU – maxpool 2 –
    FC 16·area→120 – ReLU – FC 120→84 – ReLU – FC 84→classes: LeNet-5's layers, which the
    CIFAR-10 tutorial net shares but for the first convolution's padding."""
    return nn.Sequential(
        *lead,
        nn.Conv2d(channels, 6, kernel_size=5, padding=padding),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * area, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, num_classes),
    )


@MODELS.register("resnet_gn", images=True)
def _resnet_gn(
    input_shape: tuple[int, ...], num_classes: int, *, depth: int = 8, width: int = 16, groups: int = 16
) -> nn.Module:
    """He et al.'s CIFAR ResNet with GroupNorm for DP-SGD (`dpfl.resnet`); ``depth=20`` is ResNet-20.

    ``depth`` = 6n + 2 layers with weights (8, 14, 20, 32, …), n basic blocks in each of three
    stages of ``width``, 2·``width`` and 4·``width`` channels; ``groups`` GroupNorm groups, a
    divisor of ``width`` (16, as in De et al. 2022). ResNet-20 has 269,722 parameters on
    3×32×32 inputs with 10 classes (He et al. 2016, §4.2: "0.27M"); the default ResNet-8,
    small enough to train on a CPU, has 75,290. Any image side works: global average pooling
    ends it.
    """
    lead, channels, _, _ = _image_input(input_shape, "resnet_gn")
    for field, value in (("depth", depth), ("width", width), ("groups", groups)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"model.{field}", f"must be a positive integer; got {value!r}.")
    if depth < 8 or (depth - 2) % 6:
        raise SpecError("model.depth", f"must be 6n + 2 for n ≥ 1 (8, 14, 20, 32, …); got {depth}.")
    if width % groups:
        raise SpecError("model.groups", f"must divide model.width ({width}); got {groups}.")
    blocks = (depth - 2) // 6
    return resnet.resnet_gn(lead, channels, num_classes, blocks_per_stage=blocks, width=width, groups=groups)


@MODELS.register("fraudnet")
def _fraudnet(
    input_shape: tuple[int, ...], num_classes: int, *, width: int = 30, layers: int = 4, dropout: float = 0.5
) -> nn.Module:
    """The ULDP-FL paper's Creditcard model, the authors' ``PrivateFraudNet(30, 30, 4)``
    (reference/004_uldp_fl.md §4.2; ``src/models.py`` of their code).

    Linear in→``width`` – ReLU – GroupNorm(1 group), then ``layers`` × [Linear
    ``width``→``width`` – ReLU – GroupNorm(1 group) – Dropout(``dropout``)], then Linear
    ``width``→classes: 5,012 parameters on the 30 Creditcard features with 2 classes (the paper
    says "about 4K"). GroupNorm with one group normalises each sample over its own features, so
    per-sample gradients stay per sample; they come from the engine's generic ``torch.func`` path,
    which draws each sample's own dropout masks in training mode.
    """
    for field, value in (("width", width), ("layers", layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"model.{field}", f"must be a positive integer; got {value!r}.")
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0 <= dropout < 1:
        raise SpecError("model.dropout", f"must be a probability in [0, 1); got {dropout!r}.")
    stack: list[nn.Module] = [nn.Flatten(), nn.Linear(_flat_size(input_shape), width), nn.ReLU()]
    stack.append(nn.GroupNorm(1, width))
    for _ in range(layers):
        stack += [nn.Linear(width, width), nn.ReLU(), nn.GroupNorm(1, width), nn.Dropout(float(dropout))]
    stack.append(nn.Linear(width, num_classes))
    return nn.Sequential(*stack)

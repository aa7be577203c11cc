"""The convolutional stacks' written-out gradients equal autograd's through the same model."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch, convnet, mean_grad
from dpfl.engine.convnet import conv_stack, loss_grads
from dpfl.models import build_model


def autograd_grads(model: nn.Module, layout: ParamLayout, flat: torch.Tensor, batch: SiloBatch, weights):
    """Returns ∇ Σᵢ wᵢ ℓᵢ per row [S, P], one backward per row through the nn.Module."""
    out = torch.zeros(batch.num_silos, layout.size)
    for s in range(batch.num_silos):
        layout.load_into(model, flat[s] if flat.dim() == 2 else flat)
        model.zero_grad(set_to_none=True)
        losses = F.cross_entropy(model(batch.x[s]), batch.y[s], reduction="none")
        (losses * weights[s]).sum().backward()
        out[s] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    return out


def sparse_images(rows: int, size: int, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """Images that are zero outside a random square, as MNIST's background is: every window
    there pools equal values, so the ties of the max-pools are exercised."""
    gen = torch.Generator().manual_seed(seed)
    h, w = shape[-2:]
    inside = torch.zeros(h, w)
    inside[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = 1.0
    return torch.rand(rows, size, *shape, generator=gen) * inside


MODELS = {
    # the registered models on MNIST's shapes, one with a leading Unflatten
    "cnn": ("cnn", (1, 28, 28), {}),
    "lenet": ("lenet", (28, 28), {}),
    "cifar_cnn": ("cifar_cnn", (3, 32, 32), {}),
    # odd sides: the pools leave out a last row and column
    "cnn_odd": ("cnn", (2, 27, 25), {}),
}
# Other layer orders: activations that need their input (ELU, GELU), Tanh and a negative leaky
# slope, convolutions in a row with padding, layers without bias.
STACKS = {
    "elu_gelu": lambda: nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        nn.ELU(),
        nn.MaxPool2d(2),
        nn.Conv2d(3, 4, 3),
        nn.GELU(),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 6),
        nn.Tanh(),
        nn.Linear(6, 10),
    ),
    "chained_no_bias": lambda: nn.Sequential(
        nn.Conv2d(1, 3, 3, bias=False),
        nn.Conv2d(3, 2, (3, 1), padding=(0, 1), bias=False),
        nn.LeakyReLU(-0.3),
        nn.MaxPool2d(2),
        nn.Sigmoid(),
        nn.Flatten(),
        nn.Linear(2 * 4 * 6, 10, bias=False),
    ),
}


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("shared", [False, True])
def test_loss_grads_equal_autograd(key, shared):
    name, shape, options = MODELS[key]
    model = build_model(name, input_shape=shape, num_classes=10, seed=3, **options)
    layout = ParamLayout.of(model)
    stack = conv_stack(model)
    assert stack is not None
    gen = torch.Generator().manual_seed(1)
    base = layout.flatten_module(model)
    flat = base if shared else base + 0.2 * base.abs().mean() * torch.randn(3, layout.size, generator=gen)
    x = sparse_images(3, 6, shape)
    y = torch.randint(0, 10, (3, 6), generator=gen)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False  # padding after the real samples, weight 0
    mask[2, 1] = False  # and between them
    weights = torch.rand(3, 6, generator=gen) * mask
    batch = SiloBatch(x, y, mask)
    expected = autograd_grads(model, layout, flat, batch, weights)
    actual = loss_grads(stack, layout, flat, batch, weights)
    assert float(expected.abs().max()) > 1e-2  # gradients of a meaningful size
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-6)
    assert torch.equal(batch.x, x)  # the caller's records are never overwritten


@pytest.mark.parametrize("key", STACKS)
def test_other_stacks_equal_autograd(key):
    torch.manual_seed(0)
    model = STACKS[key]()
    layout = ParamLayout.of(model)
    stack = conv_stack(model)
    assert stack is not None
    flat = layout.flatten_module(model) + 0.1 * torch.randn(2, layout.size)
    batch = SiloBatch.full(sparse_images(2, 5, (1, 12, 12)), torch.randint(0, 10, (2, 5)))
    weights = torch.rand(2, 5)
    expected = autograd_grads(model, layout, flat, batch, weights)
    assert float(expected.abs().max()) > 1e-2
    torch.testing.assert_close(
        loss_grads(stack, layout, flat, batch, weights), expected, rtol=1e-4, atol=1e-6
    )


def test_pool_passes_each_window_gradient_to_its_first_maximum():
    """Windows with every pattern of ties among their four entries, and an odd last row and
    column: the pool and its gradient are max_pool2d's and its autograd's, exactly."""
    patterns = torch.tensor([[a, b, c, d] for a in (0, 1) for b in (0, 1) for c in (0, 1) for d in (0, 1)])
    windows = patterns.float().view(16, 2, 2).permute(1, 0, 2).reshape(1, 1, 2, 32)  # side by side
    x = F.pad(torch.cat([windows, windows + torch.rand(1, 1, 2, 32)], 2), (0, 1, 0, 1), value=5.0)
    x.requires_grad_(True)
    expected = F.max_pool2d(x, 2)
    upstream = torch.randn(expected.shape)
    (expected_grad,) = torch.autograd.grad(expected, x, upstream)
    pooled, held = convnet._pool(x.detach(), choices=True)
    assert torch.equal(pooled, expected.detach())
    assert torch.equal(convnet._pool_backward(upstream, *held), expected_grad)


def test_mean_grad_takes_the_written_out_passes_for_the_cnn():
    model = build_model("cnn", input_shape=(1, 28, 28), num_classes=10, seed=0)
    layout = ParamLayout.of(model)
    x = sparse_images(2, 5, (1, 28, 28))
    batch = SiloBatch.full(x, torch.arange(10).view(2, 5))
    flat = layout.flatten_module(model).expand(2, -1)
    expected = autograd_grads(model, layout, flat, batch, torch.full((2, 5), 1 / 5))
    torch.testing.assert_close(mean_grad(model, layout, flat, batch), expected, rtol=1e-4, atol=1e-6)


_RELU = nn.ReLU()


class _Standardised(nn.Conv2d):
    """A convolution with a forward of its own."""

    def forward(self, x):
        return F.conv2d(x, self.weight - self.weight.mean(), self.bias)


def _hooked() -> nn.Module:
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 5 * 5, 2))
    model[1].register_forward_hook(lambda module, inputs, output: 3 * output)
    return model


@pytest.mark.parametrize("key", MODELS)
def test_logits_equal_the_modules_forward(key):
    name, shape, options = MODELS[key]
    model = build_model(name, input_shape=shape, num_classes=10, seed=3, **options)
    layout = ParamLayout.of(model)
    x = sparse_images(1, 7, shape)[0]
    with torch.no_grad():
        expected = model(x)
    stack = conv_stack(model)
    actual = convnet.logits(stack, layout.unflatten(layout.flatten_module(model)), x)
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-6)
    assert torch.equal(actual.argmax(1), expected.argmax(1))


@pytest.mark.parametrize(
    "model",
    [
        nn.Sequential(nn.Conv2d(1, 2, 3, stride=2), nn.Flatten(), nn.Linear(2 * 3 * 3, 2)),
        nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.Flatten(), nn.Linear(2 * 5 * 5, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3, padding="same"), nn.Flatten(), nn.Linear(2 * 7 * 7, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(3), nn.Flatten(), nn.Linear(2 * 1 * 1, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(2 * 2 * 2, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout(0.5), nn.Flatten(), nn.Linear(2 * 5 * 5, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2 * 5 * 5, 2)),
        nn.Sequential(nn.Flatten(), nn.Linear(49, 2)),  # no convolution: ghost clipping's
        nn.Sequential(
            nn.Conv2d(1, 2, 3),
            _RELU,
            nn.MaxPool2d(2),
            nn.Conv2d(2, 2, 1),
            _RELU,
            nn.Flatten(),
            nn.Linear(8, 2),
        ),
        nn.Sequential(_Standardised(1, 2, 3), nn.Flatten(), nn.Linear(2 * 5 * 5, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.ELU(inplace=True), nn.Flatten(), nn.Linear(2 * 5 * 5, 2)),
        nn.Sequential(nn.Conv2d(1, 2, 3), nn.Linear(5, 3), nn.Flatten(), nn.Linear(2 * 5 * 3, 2)),
        nn.Sequential(
            nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(50, 8), nn.Unflatten(1, (2, 2, 2)), nn.Conv2d(2, 2, 1)
        ),
        _hooked(),
    ],
    ids=[
        "strided",
        "grouped",
        "same-padding",
        "pool-3",
        "avg-pool",
        "dropout",
        "batchnorm",
        "linear",
        "shared-activation",
        "conv-subclass",
        "elu-inplace",
        "linear-before-flatten",
        "conv-after-flatten",
        "hook",
    ],
)
def test_other_models_are_left_to_vmap(model):
    """Layers these passes would get wrong: each model falls back to vmap (a shared module is
    listed once by named_children, a subclass's or a hook's forward would be skipped, ELU in
    place would overwrite the input its backward needs)."""
    assert conv_stack(model) is None

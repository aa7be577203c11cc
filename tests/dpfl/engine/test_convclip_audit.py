"""An adversarial audit of the dense convolutional pass (`convclip`) against autograd, in float64.

The privacy guarantee of a DP round of a convolutional model on a GPU rests on `convclip`: each
sample's gradient clipped to norm ≤ C exactly as autograd's per-sample gradient would be, padding
contributing nothing, and each silo's sum the sum of the clipped gradients. Here the pass runs on
the CPU (called directly, and through `grads` with the GPU's choice forced) and, where a GPU is
present, on CUDA too, against one ``torch.autograd.grad`` per sample in float64 through the
`nn.Module` itself, clipped one sample at a time in Python: norms exactly C, far above and below
it, zero gradients, gradients of the biases alone, silos of no or one real sample among padding
that holds finite garbage, padding between real samples, odd image sides, the registered models'
kernels and paddings, one model per silo, blocks that split a silo, and repeat runs.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum, convclip, grads, per_sample_grads
from dpfl.engine.convnet import conv_stack
from dpfl.engine.ghost import linear_stack
from dpfl.models import build_model

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]
F64 = torch.float64
# The registered stacks with their own kernels and paddings, on odd and on their usual sides:
# cnn (5×5, no padding, pool then ReLU), lenet (a grey lead, padding 2), cifar_cnn (3 channels).
SHAPES = {
    "cnn": (1, 19, 17),
    "lenet": (13, 15),
    "cifar_cnn": (3, 19, 17),
}
CLASSES = 4


def model_of(name: str, shape=None, seed: int = 0) -> tuple[nn.Module, ParamLayout]:
    model = build_model(name, input_shape=shape or SHAPES[name], num_classes=CLASSES, seed=seed).to(F64)
    return model, ParamLayout.of(model)


def images(silos: int, size: int, shape, seed: int = 0) -> torch.Tensor:
    """Normal images, half of them zero outside a square (ties in the pools, as MNIST's background)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(silos, size, *shape, generator=gen, dtype=F64)
    h, w = shape[-2:]
    x[:, ::2, ..., : h // 4, :] = 0.0
    x[:, ::2, ..., :, : w // 4] = 0.0
    return x


def labels(silos: int, size: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, CLASSES, (silos, size), generator=torch.Generator().manual_seed(seed))


def autograd_per_sample(model: nn.Module, layout: ParamLayout, flat: torch.Tensor, batch: SiloBatch):
    """Returns [S, B, P] in float64: one `torch.autograd.grad` per real sample through the module
    (zero for a parameter the loss does not reach), zero rows for padding."""
    model = copy.deepcopy(model).to(F64).cpu()
    params = list(model.parameters())
    out = torch.zeros(batch.num_silos, batch.batch_size, layout.size, dtype=F64)
    for s in range(batch.num_silos):
        layout.load_into(model, (flat[s] if flat.dim() == 2 else flat).to(F64).cpu())
        for i in range(batch.batch_size):
            if not batch.mask[s, i]:
                continue
            x, y = batch.x[s, i : i + 1].to(F64).cpu(), batch.y[s, i : i + 1].cpu()
            got = torch.autograd.grad(F.cross_entropy(model(x), y), params, allow_unused=True)
            out[s, i] = torch.cat(
                [
                    (torch.zeros_like(p) if g is None else g).reshape(-1)
                    for g, p in zip(got, params, strict=True)
                ]
            )
    return out


def clip_each(per_sample: torch.Tensor, clip: float) -> torch.Tensor:
    """Σᵢ gᵢ·min(1, C/‖gᵢ‖) per silo, [S, P], one sample at a time with the factor in Python."""
    out = torch.zeros(per_sample.shape[0], per_sample.shape[2], dtype=F64)
    for s in range(per_sample.shape[0]):
        for g in per_sample[s]:
            norm = float(g.norm())
            out[s] += g * (min(1.0, clip / norm) if norm > 0 else 1.0)
    return out


def factors_of(clip: float):
    return lambda norms, mask: (clip / norms.clamp(min=clip)) * mask


def to(batch: SiloBatch, device: str) -> SiloBatch:
    return SiloBatch(batch.x.to(device), batch.y.to(device), batch.mask.to(device))


def agree(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal to 1e-6 relative in float64, with an absolute floor far below any entry that matters."""
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-6, atol=1e-12 * max(scale, 1.0))


def dense(model, layout, flat, batch, clip, device):
    """(sums [S, P], norms [S, B], per-sample [S, B, P]) from `convclip` on `device`."""
    stack = conv_stack(model)
    assert stack is not None
    on = to(batch, device)
    total, norms = convclip.clipped_sum(stack, layout, flat.to(device), on, factors_of(clip))
    samples = convclip.per_sample(stack, layout, flat.to(device), on)
    assert total.dtype == norms.dtype == samples.dtype == flat.dtype  # no lower precision
    return total.cpu(), norms.cpu(), samples.cpu()


@pytest.fixture
def dense_on_the_cpu(monkeypatch):
    """Makes `grads` take the dense pass on the CPU, as it does on a GPU, and records its calls."""
    monkeypatch.setattr(grads, "_dense_pays", lambda device: True)
    taken = []
    original = convclip.clipped_sum
    monkeypatch.setattr(convclip, "clipped_sum", lambda *a: taken.append(a[3].batch_size) or original(*a))
    return taken


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_float64_clipped_sums_norms_and_samples_equal_autograd(name, device):
    """Half the samples above C and half below; padding between real samples holds finite garbage
    and labels; one silo has no real sample, one a single one."""
    model, layout = model_of(name)
    flat = layout.flatten_module(model)
    x, y = images(4, 5, SHAPES[name]), labels(4, 5)
    mask = torch.tensor(
        [[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 0, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool
    )
    x[~mask] = 37.0 * torch.randn_like(x[~mask])
    batch = SiloBatch(x, y, mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    norms = expected.norm(dim=-1)
    clip = float(norms[mask].median())
    assert int((norms[mask] > clip).sum()) >= 4 and float(norms[mask].min()) < clip
    total, got_norms, samples = dense(model, layout, flat, batch, clip, device)
    agree(samples, expected)
    agree(got_norms, norms)
    agree(total, clip_each(expected, clip))
    assert bool((samples[~mask] == 0).all()) and bool((got_norms[~mask] == 0).all())
    assert bool((total[1] == 0).all())  # a silo of padding only: exactly nothing


@pytest.mark.parametrize("device", DEVICES)
def test_one_model_per_silo_in_float64(device):
    model, layout = model_of("cifar_cnn")
    gen = torch.Generator().manual_seed(5)
    base = layout.flatten_module(model)
    flat = base + 0.3 * base.abs().mean() * torch.randn(3, layout.size, generator=gen, dtype=F64)
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    x = images(3, 4, SHAPES["cifar_cnn"])
    x[~mask] = -5.0
    batch = SiloBatch(x, labels(3, 4), mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    for clip in (1e-3, float(expected.norm(dim=-1)[mask].mean()), 1e3):
        total, norms, samples = dense(model, layout, flat, batch, clip, device)
        agree(samples, expected)
        agree(norms, expected.norm(dim=-1))
        agree(total, clip_each(expected, clip))


@pytest.mark.parametrize("device", DEVICES)
def test_a_norm_of_exactly_c_is_not_clipped_and_one_just_above_is(device):
    model, layout = model_of("cnn")
    flat = layout.flatten_module(model)
    batch = SiloBatch.full(images(1, 3, SHAPES["cnn"]), labels(1, 3))
    expected = autograd_per_sample(model, layout, flat, batch)
    stack = conv_stack(model)
    for i in range(3):
        one = SiloBatch(batch.x[:, i : i + 1], batch.y[:, i : i + 1], batch.mask[:, i : i + 1])
        # the pass's own norm as C, from a pass over this sample alone (on a GPU a pass over
        # other samples too may pick other kernels, a last bit apart): the factor is 1 exactly
        _, norms = convclip.clipped_sum(stack, layout, flat.to(device), to(one, device), factors_of(1.0))
        exact = float(norms[0, 0])
        total, _, _ = dense(model, layout, flat, one, exact, device)
        agree(total[0], expected[0, i])
        # the same pass at twice C (a factor of 1 for certain) gives the same bits: the factor was
        # exactly 1 (a second pass, per-sample, may sum in another order, a last bit apart)
        unclipped, _, _ = dense(model, layout, flat, one, 2 * exact, device)
        assert torch.equal(total[0], unclipped[0])
        below = exact * (1 - 1e-9)  # just above C: clipped, to norm C
        total, _, _ = dense(model, layout, flat, one, below, device)
        agree(total[0], expected[0, i] * (below / float(expected[0, i].norm())))
        assert float(total[0].norm()) <= below * (1 + 1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e4])
@pytest.mark.parametrize("clip", [1e-8, 1.0, 1e8])
def test_each_samples_share_is_its_gradient_clipped_to_c(scale, clip, device):
    """Silos of one sample each, inputs from 1e-6 to 1e4 (gradient norms from about 1e-2 to 1e5)
    and C from 1e-8 to 1e8: each silo's sum is that sample's clipped gradient, of norm min(‖g‖, C)."""
    model, layout = model_of("lenet")
    flat = layout.flatten_module(model)
    batch = SiloBatch.full(scale * images(4, 1, SHAPES["lenet"]), labels(4, 1))
    expected = autograd_per_sample(model, layout, flat, batch)
    total, norms, _ = dense(model, layout, flat, batch, clip, device)
    agree(norms, expected.norm(dim=-1))
    agree(total, clip_each(expected, clip))
    bound = torch.minimum(norms[:, 0], torch.tensor(clip, dtype=F64))
    torch.testing.assert_close(total.norm(dim=-1), bound, rtol=1e-9, atol=0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_gradients_and_gradients_of_the_biases_alone(device):
    """A last bias so large that softmax is one-hot for class 0 (gradient exactly zero: norm 0, no
    NaN from 0/0), and blank images (every convolution's weight gradient is zero, the norm is the
    biases' and the linear layers')."""
    model, layout = model_of("cifar_cnn")
    flat = layout.flatten_module(model).clone()
    last = layout.names[-1]
    layout.unflatten(flat)[last][0] = 1e4
    x = images(2, 4, SHAPES["cifar_cnn"])
    x[1] = 0.0
    y = torch.tensor([[0, 1, 3, 2], [0, 3, 1, 2]])
    batch = SiloBatch.full(x, y)
    expected = autograd_per_sample(model, layout, flat, batch)
    norms = expected.norm(dim=-1)
    assert bool((norms[:, 0] == 0).all()) and bool((norms[:, 1:] > 0).all())
    views = layout.unflatten(expected[1])
    assert float(views["0.weight"].abs().max()) == 0 and float(views["0.bias"].abs().max()) > 0
    for clip in (1e-3, 1e3):
        total, got_norms, samples = dense(model, layout, flat, batch, clip, device)
        assert bool(torch.isfinite(total).all())
        assert bool((got_norms[:, 0] == 0).all()) and bool((samples[:, 0] == 0).all())
        agree(got_norms, norms)
        agree(total, clip_each(expected, clip))


@pytest.mark.parametrize("device", DEVICES)
def test_padding_changes_nothing_and_removing_a_sample_moves_the_sum_by_at_most_c(device):
    """The sum query's sensitivity: a silo's sum with one sample masked out differs from the sum
    with it by that sample's clipped gradient, of norm ≤ C; what the padding holds (zeros, large
    finite values, other labels) changes not one bit."""
    model, layout = model_of("cnn")
    flat = layout.flatten_module(model)
    x, y = images(1, 6, SHAPES["cnn"]), labels(1, 6)
    full = SiloBatch.full(x, y)
    expected = autograd_per_sample(model, layout, flat, full)
    clip = float(expected.norm(dim=-1).median())
    with_all, _, _ = dense(model, layout, flat, full, clip, device)
    for i in range(6):
        mask = full.mask.clone()
        mask[0, i] = False
        results = []
        for garbage, label in ((0.0, 0), (1e3, 3), (-7.0, 1)):
            held = x.clone()
            held[0, i] = garbage
            results.append(
                dense(model, layout, flat, SiloBatch(held, torch.where(mask, y, label), mask), clip, device)
            )
        for other in results[1:]:
            assert all(torch.equal(a, b) for a, b in zip(results[0], other, strict=True))
        without = results[0][0]
        change = with_all - without
        agree(change, clip_each(expected[:, i : i + 1], clip))
        assert float(change.norm()) <= clip * (1 + 1e-9)


@pytest.mark.parametrize("device", DEVICES)
def test_blocks_that_split_silos_give_the_one_block_result(dense_on_the_cpu, device):
    """`grads`' memory-bounded blocks: one sample, two, three, seven (a block boundary inside every
    silo, one block all padding), several silos a block; each equals autograd and the one-block pass."""
    model, layout = model_of("cnn")
    flat = layout.flatten_module(model).to(device)
    mask = torch.tensor([[1, 1, 1, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1], [1] * 7], dtype=torch.bool)
    x = images(3, 7, SHAPES["cnn"])
    x[~mask] = 11.0
    batch = SiloBatch(x, labels(3, 7), mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    clip = float(expected.norm(dim=-1)[mask].median())
    per = convclip.bytes_per_sample(conv_stack(model), SHAPES["cnn"])
    results = []
    with torch.device(device):
        on = to(batch, device)
        blocks = {  # budget: the samples of each dense pass, silo by silo
            None: [7],
            1: [1] * 21,
            per: [1] * 21,
            2 * per: [2, 2, 2, 1] * 3,
            3 * per: [3, 3, 1] * 3,
            7 * per - 1: [6, 1] * 3,
            14 * per: [7, 7],  # silos 0–1, then silo 2
        }
        for budget, sizes in blocks.items():
            dense_on_the_cpu.clear()
            results.append(clipped_grad_sum(model, layout, flat, on, clip=clip, memory_budget_bytes=budget))
            assert dense_on_the_cpu == sizes
        samples = per_sample_grads(model, layout, flat, on, memory_budget_bytes=2 * per)
    agree(samples, expected)
    for result in results:
        agree(result.sum, clip_each(expected, clip))
        agree(result.norms, expected.norm(dim=-1))
        assert torch.equal(result.count.cpu(), mask.sum(1))


def test_a_large_batch_in_float32_and_float64_repeats_itself_and_equals_autograd(dense_on_the_cpu):
    """128 samples of a silo through `grads`, blocks of 40 (a boundary mid-silo); float32 keeps its
    norms in float32 (no lower precision) and agrees with float64 autograd to float32's accuracy;
    two runs give the same bits."""
    model, layout = model_of("cnn", shape=(1, 16, 16))
    x = images(2, 64, (1, 16, 16))
    mask = torch.rand(2, 64, generator=torch.Generator().manual_seed(3)) < 0.8
    batch = SiloBatch(x, labels(2, 64), mask)
    flat = layout.flatten_module(model)
    expected = autograd_per_sample(model, layout, flat, batch)
    clip = float(expected.norm(dim=-1)[mask].median())
    budget = 40 * convclip.bytes_per_sample(conv_stack(model), (1, 16, 16))
    for dtype, rtol in ((F64, 1e-6), (torch.float32, 2e-4)):
        on = SiloBatch(x.to(dtype), batch.y, mask)
        first, second = (
            clipped_grad_sum(model, layout, flat.to(dtype), on, clip=clip, memory_budget_bytes=budget)
            for _ in range(2)
        )
        assert torch.equal(first.sum, second.sum) and torch.equal(first.norms, second.norms)
        assert first.sum.dtype == first.norms.dtype == dtype
        reference = clip_each(expected, clip)
        torch.testing.assert_close(
            first.sum.double(), reference, rtol=rtol, atol=rtol * float(reference.abs().max())
        )
        torch.testing.assert_close(first.norms.double(), expected.norm(dim=-1), rtol=rtol, atol=0.0)
    assert dense_on_the_cpu == [40, 24] * 8  # two silos, two runs, two dtypes


def test_resnet_gn_keeps_the_generic_path_and_clips_its_groupnorm_affine_too(dense_on_the_cpu):
    """GroupNorm and residual blocks are no `ConvStack`: even with the GPU's choice the generic
    path runs, and its norms include the GroupNorm scales and shifts."""
    model = build_model(
        "resnet_gn", input_shape=(2, 9, 7), num_classes=CLASSES, seed=0, width=4, groups=2
    ).to(F64)
    layout = ParamLayout.of(model)
    assert conv_stack(model) is None
    flat = layout.flatten_module(model)
    mask = torch.tensor([[1, 0, 1], [0, 0, 0]], dtype=torch.bool)
    batch = SiloBatch(images(2, 3, (2, 9, 7)), labels(2, 3), mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    affine = [n for n, p in model.named_parameters() if p.dim() == 1 and "weight" in n]
    assert affine and any(float(layout.unflatten(expected[0, 0])[n].abs().max()) > 0 for n in affine)
    clip = float(expected.norm(dim=-1)[mask].min()) / 2
    result = clipped_grad_sum(model, layout, flat, batch, clip=clip)
    assert dense_on_the_cpu == []
    agree(result.sum, clip_each(expected, clip))
    agree(result.norms, expected.norm(dim=-1))


class Scaled(nn.Conv2d):
    """A convolution subclass: never mistaken for its base."""


def extra_parameter_models() -> dict[str, nn.Module]:
    """Conv stacks with a parameter the written-out passes would never write."""
    torch.manual_seed(0)

    def base():
        return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 5 * 5, CLASSES))

    own = base()
    own.register_parameter("temperature", nn.Parameter(torch.ones(3)))
    extra = base()
    extra[0].register_parameter("gain", nn.Parameter(torch.ones(2)))
    activation = base()
    activation[1].register_parameter("slope", nn.Parameter(torch.ones(1)))
    shared = nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(50, 50), nn.ReLU(), nn.Linear(50, 50), nn.Linear(50, 4)
    )
    shared[4].weight = shared[2].weight  # one Parameter in two layers: named_parameters lists it once
    return {"own": own, "extra": extra, "activation": activation, "shared": shared}


@pytest.mark.parametrize("key", ["own", "extra", "activation", "shared"])
def test_a_parameter_the_passes_never_write_sends_the_model_to_the_generic_path(key, dense_on_the_cpu):
    """The dense pass writes each silo's sum into `torch.empty` slot by slot: a parameter outside
    its layers' weights and biases (the Sequential's own, an extra one on a layer, one tied between
    two layers) used to keep uninitialised memory in its slot of the clipped sum, and be left out
    of the norm. Such a model is no `ConvStack` (nor a ghost stack) and takes the generic path."""
    model = extra_parameter_models()[key].to(F64)
    layout = ParamLayout.of(model)
    assert conv_stack(model) is None and linear_stack(model) is None
    flat = layout.flatten_module(model)
    batch = SiloBatch.full(images(2, 3, (1, 7, 7)), labels(2, 3))
    expected = autograd_per_sample(model, layout, flat, batch)
    result = clipped_grad_sum(model, layout, flat, batch, clip=0.1)
    assert dense_on_the_cpu == []
    agree(result.sum, clip_each(expected, 0.1))


def test_the_ghost_path_refuses_a_linear_stack_with_a_parameter_it_never_writes():
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, CLASSES)).to(F64)
    assert linear_stack(model) is not None
    model.register_parameter("temperature", nn.Parameter(torch.ones(2, dtype=F64)))
    assert linear_stack(model) is None
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    x = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(0), dtype=F64)
    batch = SiloBatch.full(x, labels(2, 3))
    expected = autograd_per_sample(model, layout, flat, batch)
    agree(clipped_grad_sum(model, layout, flat, batch, clip=0.1).sum, clip_each(expected, 0.1))


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(1, 2, 3, stride=2),
        nn.Conv2d(1, 2, 3, dilation=2),
        nn.Conv2d(2, 2, 3, groups=2),
        nn.Conv2d(1, 2, 3, padding="same"),
        nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"),
        Scaled(1, 2, 3),
    ],
    ids=["stride", "dilation", "groups", "same", "reflect", "subclass"],
)
def test_convolutions_the_columns_do_not_model_are_refused(conv):
    model = nn.Sequential(conv, nn.Flatten(), nn.LazyLinear(CLASSES))
    assert conv_stack(model) is None


@pytest.mark.parametrize("device", DEVICES)
def test_rectangular_kernels_and_asymmetric_padding_equal_autograd(device):
    torch.manual_seed(2)
    model = nn.Sequential(
        nn.Conv2d(2, 3, (2, 4), padding=(1, 0)),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(3, 4, (3, 1), padding=(0, 2)),
        nn.Flatten(),
        nn.Linear(4 * 3 * 9, CLASSES),
    ).to(F64)
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    mask = torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=torch.bool)
    batch = SiloBatch(images(2, 3, (2, 9, 13)), labels(2, 3), mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    clip = float(expected.norm(dim=-1)[mask].median())
    total, norms, samples = dense(model, layout, flat, batch, clip, device)
    agree(samples, expected)
    agree(norms, expected.norm(dim=-1))
    agree(total, clip_each(expected, clip))

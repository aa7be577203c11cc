"""Convolutional stacks' per-sample gradients from one dense pass (`convclip`) equal autograd's.

The dense pass is what a GPU takes for an MB-SGD round of a convolutional model (`clipped_grad_sum`
and `per_sample_grads` at one shared model); here it runs on the CPU, `device="cpu"`, both called
directly and through `grads` with the GPU's choice forced, against one backward per sample. The
CUDA tests at the end run the same comparisons on a GPU (scripts/gpu-check-conv.sh).
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum, convclip, grads, per_sample_grads
from dpfl.engine.convnet import conv_stack
from dpfl.models import build_model
from tests.dpfl.engine.factories import (
    loop_per_sample_grads,
    model_and_layout,
    random_batch,
    silo_params,
    unequal_batch,
)
from tests.dpfl.engine.test_convnet import STACKS, sparse_images

CONV = ["cnn", "lenet", "cifar_cnn"]


def close(actual, expected, rtol=1e-5, atol=1e-6):
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


def reference_clipped(grads: torch.Tensor, clip: float) -> torch.Tensor:
    """Clips each per-sample gradient [S, B, P] to norm ≤ clip, one at a time, and sums per silo
    (test_grads' reference, repeated: that module needs hypothesis, which a GPU machine may lack)."""
    out = torch.zeros(grads.shape[0], grads.shape[2])
    for s in range(grads.shape[0]):
        for g in grads[s]:
            norm = g.norm()
            out[s] += g * min(1.0, clip / norm.item()) if norm > 0 else g
    return out


def factors_of(clip):
    return lambda norms, mask: (clip / norms.clamp(min=clip)) * mask


def params_of(model, layout, shared, silos=3):
    return layout.flatten_module(model) if shared else silo_params(model, layout, num_silos=silos)


@pytest.mark.parametrize("name", CONV)
@pytest.mark.parametrize("shared", [True, False])
def test_per_sample_gradients_equal_a_backward_per_sample(name, shared):
    model, layout = model_and_layout(name)
    flat = params_of(model, layout, shared)
    batch = random_batch(name, num_silos=3, batch_size=4)
    expected = loop_per_sample_grads(model, layout, flat, batch)
    assert float(expected.abs().max()) > 0.1  # gradients of a meaningful size
    got = convclip.per_sample(conv_stack(model), layout, flat, batch)
    assert got.device.type == "cpu" and got.shape == (3, 4, layout.size)
    close(got, expected, rtol=0.0, atol=1e-5)


@pytest.mark.parametrize("key", STACKS)
def test_other_layer_orders_equal_a_backward_per_sample(key):
    """ELU and GELU (their backward needs the input), Tanh, a negative leaky slope, convolutions
    in a row with padding, layers without bias, pools that leave out a last row."""
    torch.manual_seed(0)
    model = STACKS[key]()
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    batch = SiloBatch.full(sparse_images(2, 5, (1, 12, 12)), torch.randint(0, 10, (2, 5)))
    expected = loop_per_sample_grads(model, layout, flat, batch)
    assert float(expected.abs().max()) > 1e-2
    close(convclip.per_sample(conv_stack(model), layout, flat, batch), expected, rtol=0.0, atol=1e-5)


@pytest.mark.parametrize("name", CONV)
@pytest.mark.parametrize("clip", [1e-3, 0.05, 1e3])
@pytest.mark.parametrize("shared", [True, False])
def test_clipped_sum_equals_clipping_each_sample_alone(name, clip, shared):
    model, layout = model_and_layout(name)
    flat = params_of(model, layout, shared)
    batch = random_batch(name, num_silos=3, batch_size=6)
    expected = loop_per_sample_grads(model, layout, flat, batch)
    total, norms = convclip.clipped_sum(conv_stack(model), layout, flat, batch, factors_of(clip))
    close(total, reference_clipped(expected, clip), rtol=1e-5, atol=1e-6)
    close(norms, expected.norm(dim=-1), rtol=1e-5, atol=1e-6)
    # the clipped sum of a silo is at most C per sample, and the bound is reached for a small C
    assert bool((total.norm(dim=-1) <= 6 * clip * (1 + 1e-5)).all())


def test_the_odd_sided_cnn_and_a_grey_lead_equal_autograd():
    """A 2-channel 27×25 input (the pools leave out a row and a column), and LeNet's 28×28 grey
    images through its leading Unflatten."""
    for name, shape in (("cnn", (2, 27, 25)), ("lenet", (28, 28))):
        model = build_model(name, input_shape=shape, num_classes=10, seed=3)
        layout = ParamLayout.of(model)
        flat = layout.flatten_module(model)
        x = sparse_images(2, 3, shape)
        batch = SiloBatch.full(x, torch.randint(0, 10, (2, 3), generator=torch.Generator().manual_seed(4)))
        expected = loop_per_sample_grads(model, layout, flat, batch)
        close(convclip.per_sample(conv_stack(model), layout, flat, batch), expected, rtol=0.0, atol=1e-5)
        assert torch.equal(batch.x, x)  # the caller's records are never overwritten


def test_padding_contributes_nothing():
    model, layout = model_and_layout("cifar_cnn")
    flat = layout.flatten_module(model)
    sizes = [5, 1, 0]
    padded = unequal_batch("cifar_cnn", sizes, padding=7.0)  # finite garbage in the padding
    stack = conv_stack(model)
    total, norms = convclip.clipped_sum(stack, layout, flat, padded, factors_of(0.05))
    samples = convclip.per_sample(stack, layout, flat, padded)
    assert bool((samples[~padded.mask] == 0).all()) and bool((norms[~padded.mask] == 0).all())
    assert float(total[2].abs().max()) == 0.0
    for s in (0, 1):
        alone, _ = convclip.clipped_sum(stack, layout, flat, padded.silo(s), factors_of(0.05))
        close(total[s], alone[0])


@pytest.fixture
def dense_on_the_cpu(monkeypatch):
    """Makes `grads` choose the dense pass on the CPU, as it does on a GPU."""
    monkeypatch.setattr(grads, "_dense_pays", lambda device: True)


@pytest.mark.usefixtures("dense_on_the_cpu")
def test_grads_take_the_dense_pass_at_a_shared_model_on_the_gpus_choice(monkeypatch):
    model, layout = model_and_layout("cifar_cnn")
    flat = layout.flatten_module(model)
    batch = unequal_batch("cifar_cnn", [6, 4, 5])
    expected = loop_per_sample_grads(model, layout, flat, batch)
    taken = []
    for name in ("clipped_sum", "per_sample"):
        original = getattr(convclip, name)
        monkeypatch.setattr(convclip, name, lambda *a, f=original, n=name: taken.append(n) or f(*a))
    result = clipped_grad_sum(model, layout, flat, batch, clip=0.05)
    close(result.sum, reference_clipped(expected, 0.05), rtol=1e-5, atol=1e-6)
    close(result.norms, expected.norm(dim=-1), rtol=1e-5, atol=1e-6)
    close(per_sample_grads(model, layout, flat, batch), expected, rtol=0.0, atol=1e-5)
    # small blocks: the same numbers, block by block
    chunked = clipped_grad_sum(model, layout, flat, batch, clip=0.05, memory_budget_bytes=1)
    close(chunked.sum, result.sum)
    assert taken[:2] == ["clipped_sum", "per_sample"] and set(taken[2:]) == {"clipped_sum"}
    # one model per silo, or the reference method: the generic path
    taken.clear()
    clipped_grad_sum(model, layout, flat.expand(3, -1), batch, clip=0.05)
    clipped_grad_sum(model, layout, flat, batch, clip=0.05, method="per_sample")
    assert taken == []


def test_the_cpu_keeps_the_generic_path_and_gpus_take_the_dense_one():
    model, layout = model_and_layout("cnn")
    flat = layout.flatten_module(model)
    assert grads._conv_path(model, flat) is None
    assert not grads._dense_pays(torch.device("cpu"))
    assert grads._dense_pays(torch.device("cuda"))
    mlp, _ = model_and_layout("mlp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grads, "_dense_pays", lambda device: True)
        assert grads._conv_path(model, flat) is not None
        assert grads._conv_path(model, flat.expand(2, -1)) is None
        assert grads._conv_path(mlp, flat) is None


def test_a_cifar_round_is_one_block_on_a_gpu():
    """The working-memory estimate of one CIFAR-10 sample: twice its unfolded inputs and the rest;
    the benchmark's round (10 silos × 346) fits an eighth of an 80 GB GPU, so it is one pass."""
    model = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=0)
    per_sample = convclip.bytes_per_sample(conv_stack(model), (3, 32, 32))
    first_columns = 3 * 25 * 28 * 28 * 4  # 235,200 bytes
    assert 2 * first_columns < per_sample < 6 * first_columns
    assert 3460 * per_sample < 80e9 / 8


CUDA = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu-check-conv.sh)"
)


@pytest.fixture
def full_float32():
    """Runs cuDNN's convolutions in full float32: PyTorch lets them use TF32 by default, whose
    10-bit mantissa would blur an equality to 1e-5 into one to 1e-3."""
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


@CUDA
@pytest.mark.usefixtures("full_float32")
@pytest.mark.parametrize("name", CONV)
def test_the_gpu_round_equals_autograd_and_repeats_itself(name):
    model, layout = model_and_layout(name)
    flat = layout.flatten_module(model)
    batch = unequal_batch(name, [6, 4, 5])
    expected = loop_per_sample_grads(model, layout, flat, batch)
    on_gpu = SiloBatch(batch.x.cuda(), batch.y.cuda(), batch.mask.cuda())
    with torch.device("cuda"):
        first, second = (clipped_grad_sum(model, layout, flat.cuda(), on_gpu, clip=0.05) for _ in range(2))
        samples = per_sample_grads(model, layout, flat.cuda(), on_gpu)
    assert torch.equal(first.sum, second.sum) and torch.equal(first.norms, second.norms)
    close(first.sum.cpu(), reference_clipped(expected, 0.05), rtol=1e-4, atol=1e-5)
    close(first.norms.cpu(), expected.norm(dim=-1), rtol=1e-4, atol=1e-5)
    close(samples.cpu(), expected, rtol=0.0, atol=1e-5)


@CUDA
def test_the_gpu_cifar_round_repeats_itself_and_equals_the_generic_path():
    """The benchmark's shape: 10 silos × 346 CIFAR-10 samples at one model. With PyTorch's
    defaults (TF32 convolutions) the same numbers twice; in full float32 those of ``vmap``."""
    model = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=0)
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model).cuda()
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(10, 346, 3, 32, 32, generator=gen), torch.randint(0, 10, (10, 346), generator=gen)
    batch = SiloBatch.full(x.cuda(), y.cuda())
    with torch.device("cuda"):
        first, second = (clipped_grad_sum(model, layout, flat, batch, clip=1.0) for _ in range(2))
        assert torch.equal(first.sum, second.sum) and torch.equal(first.norms, second.norms)
        before = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        try:
            dense = clipped_grad_sum(model, layout, flat, batch, clip=1.0)
            generic = clipped_grad_sum(model, layout, flat, batch, clip=1.0, method="per_sample")
        finally:
            torch.backends.cudnn.allow_tf32 = before
    close(dense.norms, generic.norms, rtol=1e-4, atol=1e-5)
    close(dense.sum, generic.sum, rtol=1e-4, atol=1e-4)
    close(first.sum, dense.sum, rtol=1e-2, atol=1e-2)  # TF32 moves it by about 1e-3 only


def test_the_loss_is_each_samples_own():
    """The per-sample gradient is of sample i's own loss (no mean over the batch): one sample's
    gradient does not change when the others change."""
    model, layout = model_and_layout("cnn")
    flat = layout.flatten_module(model)
    batch = random_batch("cnn", num_silos=1, batch_size=3)
    other = SiloBatch(torch.cat([batch.x[:, :1], 5 * batch.x[:, 1:]], dim=1), batch.y, batch.mask)
    stack = conv_stack(model)
    first = convclip.per_sample(stack, layout, flat, batch)[0, 0]
    close(convclip.per_sample(stack, layout, flat, other)[0, 0], first)
    layout.load_into(model, flat)
    logits = model(batch.x[0, :1])
    expected = torch.autograd.grad(F.cross_entropy(logits, batch.y[0, :1]), list(model.parameters()))
    close(first, torch.cat([g.reshape(-1) for g in expected]), rtol=0.0, atol=1e-5)


def test_a_model_that_is_no_conv_stack_is_refused_by_the_selection():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, stride=2), nn.Flatten(), nn.Linear(2 * 5 * 5, 3))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grads, "_dense_pays", lambda device: True)
        assert grads._conv_path(model, ParamLayout.of(model).flatten_module(model)) is None


@pytest.mark.parametrize("padding", [0, 2])
def test_the_columns_are_f_unfolds_exactly(padding):
    # strided views and one copy instead of CUDA's one im2col kernel per sample
    conv = nn.Conv2d(3, 4, 5, padding=padding)
    a = torch.randn(7, 3, 13, 11, generator=torch.Generator().manual_seed(0))
    assert torch.equal(convclip._columns(a, conv), F.unfold(a, conv.kernel_size, padding=conv.padding))

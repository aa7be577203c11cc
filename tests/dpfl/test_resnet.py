"""The GroupNorm ResNet (`resnet_gn`): He et al.'s parameter counts, a pure seeded function of its
parameters, per-sample gradients through the engine's generic path equal to autograd's one sample
at a time, and a private run on generated CIFAR-10 files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfl import runner
from dpfl.data.files import file_digest
from dpfl.data.loaders import cifar
from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum, ghost_clipping_applies, mean_grad
from dpfl.engine.convnet import conv_stack
from dpfl.errors import SpecError
from dpfl.models import build_model
from dpfl.resnet import ResidualBlock
from dpfl.spec import parse_spec
from tests.dpfl.data.test_cifar import write_archive


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_resnet20_has_he_et_al_parameter_count():
    model = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, depth=20)
    # He et al. 2016 §4.2, ResNet-20 "0.27M": convolutions 432 + 6·2,304 (stage 1) + 4,608 + 5·9,216
    # (stage 2) + 18,432 + 5·36,864 (stage 3), the linear layer 650, and GroupNorm's scale and
    # shift where BatchNorm's were: 2·(16 + 6·16 + 6·32 + 6·64) = 1,376.
    assert num_params(model) == 432 + 13_824 + 50_688 + 202_752 + 650 + 1_376 == 269_722
    assert sum(isinstance(m, nn.GroupNorm) for m in model.modules()) == 19
    assert sum(isinstance(m, ResidualBlock) for m in model.modules()) == 9


def test_default_is_resnet8_on_colour_and_grey_images():
    colour = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10)
    assert sum(isinstance(m, ResidualBlock) for m in colour.modules()) == 3
    # 432 + 2,304 + 4,608 + 9,216 + 18,432 + 36,864 (convolutions) + 650 + 2·(16 + 2·16 + 2·32 + 2·64)
    assert num_params(colour) == 71_856 + 650 + 480 + 2_304 == 75_290
    # one input channel: the first convolution has 16·9 weights instead of 16·27
    assert num_params(build_model("resnet_gn", input_shape=(28, 28), num_classes=10)) == 75_290 - 288


@pytest.mark.parametrize(
    ("shape", "options"),
    [
        ((3, 32, 32), {}),
        ((1, 28, 28), {"depth": 14}),
        ((28, 28), {}),
        ((2, 15, 9), {"width": 8, "groups": 4}),
    ],
)
def test_outputs_one_logit_per_class_for_any_image_side(shape, options):
    model = build_model("resnet_gn", input_shape=shape, num_classes=7, **options)
    assert model(torch.rand(3, *shape)).shape == (3, 7)


def test_grey_images_without_a_channel_dimension_give_the_same_logits():
    a = build_model("resnet_gn", input_shape=(28, 28), num_classes=10, seed=4)
    b = build_model("resnet_gn", input_shape=(1, 28, 28), num_classes=10, seed=4)
    x = torch.linspace(-1, 1, 2 * 784).reshape(2, 28, 28)
    torch.testing.assert_close(a(x), b(x.unsqueeze(1)))


def test_init_is_seeded_never_touches_the_global_rng_and_sets_groupnorm_to_identity():
    state = torch.random.get_rng_state()
    a = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, seed=11)
    b = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, seed=11)
    c = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, seed=12)
    assert torch.equal(torch.random.get_rng_state(), state)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    drawn = [
        (ma, mc)
        for ma, mc in zip(a.modules(), c.modules(), strict=True)
        if isinstance(ma, nn.Conv2d | nn.Linear)
    ]
    assert len(drawn) == 8 and all(not torch.equal(ma.weight, mc.weight) for ma, mc in drawn)
    for module in a.modules():
        if isinstance(module, nn.GroupNorm):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            assert torch.equal(module.bias, torch.zeros_like(module.bias))
        if isinstance(module, nn.Conv2d):  # PyTorch's default bound ±1/√fan_in, no bias
            assert module.bias is None
            bound = 1 / module.weight[0].numel() ** 0.5
            assert 0.5 * bound < module.weight.abs().max() <= bound
    assert list(a.buffers()) == []
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm | nn.Dropout) for m in a.modules())


def test_the_engine_sends_it_to_the_generic_path():
    """Ghost clipping and the written-out convolution passes know plain stacks only: a residual
    block or a GroupNorm must send the model to `torch.func`, never to a wrong hand-written pass."""
    model = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10)
    assert conv_stack(model) is None
    assert not ghost_clipping_applies(model)
    with pytest.raises(ValueError, match="method='ghost' needs a Sequential of Linear layers"):
        layout = ParamLayout.of(model)
        batch = SiloBatch.full(torch.rand(1, 2, 3, 32, 32), torch.zeros(1, 2, dtype=torch.long))
        clipped_grad_sum(model, layout, layout.flatten_module(model), batch, clip=1.0, method="ghost")


def autograd_per_sample(model: nn.Module, layout: ParamLayout, flat: torch.Tensor, batch: SiloBatch):
    """Returns [S, B, P]: one `torch.autograd.grad` per real sample through the nn.Module."""
    out = torch.zeros(batch.num_silos, batch.batch_size, layout.size)
    for s in range(batch.num_silos):
        layout.load_into(model, flat[s] if flat.dim() == 2 else flat)
        for i in range(batch.batch_size):
            if batch.mask[s, i]:
                loss = F.cross_entropy(model(batch.x[s, i : i + 1]), batch.y[s, i : i + 1])
                out[s, i] = torch.cat(
                    [g.reshape(-1) for g in torch.autograd.grad(loss, list(model.parameters()))]
                )
    return out


@pytest.mark.parametrize("shared", [False, True])
def test_engine_gradients_equal_autograd_one_sample_at_a_time(shared):
    # 3×32×32 CIFAR-10 images; silo 1 has a padded slot holding finite garbage
    model = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, seed=3)
    layout = ParamLayout.of(model)
    gen = torch.Generator().manual_seed(1)
    base = layout.flatten_module(model)
    flat = base if shared else base + 0.2 * base.abs().mean() * torch.randn(2, layout.size, generator=gen)
    x = torch.rand(2, 3, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (2, 3), generator=gen)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    batch = SiloBatch(x, y, mask)
    expected = autograd_per_sample(model, layout, flat, batch)
    norms = expected.norm(dim=-1)
    clip = float(norms[mask].median())  # some samples are clipped, some are not
    assert float(norms[mask].min()) < clip < float(norms[mask].max())

    result = clipped_grad_sum(model, layout, flat, batch, clip=clip)  # what DP-SGD's rounds call
    factors = (clip / norms.clamp(min=clip)) * mask
    torch.testing.assert_close(
        result.sum, torch.einsum("sb,sbp->sp", factors, expected), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(result.norms, norms * mask, rtol=1e-5, atol=1e-5)
    assert result.count.tolist() == [3, 2]
    # what local steps and non-private rounds call: the mean over each silo's real samples
    means = expected.sum(dim=1) / mask.sum(dim=1, keepdim=True)
    torch.testing.assert_close(mean_grad(model, layout, flat, batch), means, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("options", "field", "reason"),
    [
        ({"depth": 10}, "model.depth", "must be 6n + 2 for n ≥ 1 (8, 14, 20, 32, …); got 10."),
        ({"depth": 2}, "model.depth", "must be 6n + 2 for n ≥ 1 (8, 14, 20, 32, …); got 2."),
        ({"depth": 20.0}, "model.depth", "must be a positive integer; got 20.0."),
        ({"width": 0}, "model.width", "must be a positive integer; got 0."),
        ({"groups": True}, "model.groups", "must be a positive integer; got True."),
        ({"width": 12}, "model.groups", "must divide model.width (12); got 16."),
    ],
)
def test_options_outside_the_family_name_the_field(options, field, reason):
    with pytest.raises(SpecError) as info:
        build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, **options)
    assert (info.value.field, info.value.reason) == (field, reason)


def test_flat_inputs_are_refused():
    with pytest.raises(SpecError, match=r"'resnet_gn' needs images \(H, W\) or \(C, H, W\); got \(64,\)"):
        build_model("resnet_gn", input_shape=(64,), num_classes=10)


@pytest.fixture
def generated_cifar(tmp_path, monkeypatch) -> Path:
    """A folder with a generated CIFAR-10 archive (60 training, 40 test images) that the loader
    takes for the official one: its checksum is the generated file's."""
    folder = tmp_path / "data"
    (folder / "cifar10").mkdir(parents=True)
    path = folder / "cifar10" / "cifar-10-python.tar.gz"
    write_archive(path, per_batch=12, test=40)
    spec = dataclasses.replace(cifar.CIFAR10_FILES[0], sha256=file_digest(path, "sha256"))
    monkeypatch.setattr(cifar, "CIFAR10_FILES", (spec,))
    return folder


def test_an_isrl_mbsgd_run_trains_it_within_its_privacy_target(generated_cifar):
    spec = parse_spec(
        {
            "algorithm": "isrl_mbsgd",
            "params": {"lr": 0.05, "batch_size": 4, "clip": 1.0},
            "dataset": {"name": "cifar10", "silos": 3, "records_per_silo": 8},
            "model": {"name": "resnet_gn"},
            "rounds": 2,
            "privacy": {"epsilon": 3.0, "delta": 1e-5},
            "seed": 1,
        }
    )
    result = runner.run(spec, data_dirs=[generated_cifar], device="cpu")
    assert result.epsilon is not None and 2.9 < result.epsilon <= 3.0 + 1e-9
    assert result.final_params.numel() == 75_290  # the default ResNet-8 on 3×32×32
    assert bool(torch.isfinite(result.final_params).all())
    initial = build_model("resnet_gn", input_shape=(3, 32, 32), num_classes=10, seed=1)  # the spec's seed
    assert not torch.equal(result.final_params, ParamLayout.of(initial).flatten_module(initial))
    assert result.final.accuracy is not None and 0.0 <= result.final.accuracy <= 1.0

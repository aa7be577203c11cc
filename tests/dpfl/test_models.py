import math
import subprocess
import sys

import pytest
import torch
from torch import nn

from dpfl.errors import SpecError, UnknownNameError
from dpfl.models import MODELS, build_model, registered_models

SHAPES = {
    "logreg": (50,),
    "mlp": (50,),
    "cnn": (1, 28, 28),
    "cifar_cnn": (3, 32, 32),
    "lenet": (28, 28),
    "resnet_gn": (3, 32, 32),
}


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_registry_lists_the_seven_models():
    assert registered_models() == ["cifar_cnn", "cnn", "fraudnet", "lenet", "logreg", "mlp", "resnet_gn"]


def test_unknown_model_names_what_is_registered():
    message = "unknown model 'resnet'; registered: cifar_cnn, cnn, fraudnet, lenet, logreg, mlp, resnet_gn"
    with pytest.raises(UnknownNameError, match=message) as info:
        build_model("resnet", input_shape=(50,), num_classes=10)
    assert info.value.known == ["cifar_cnn", "cnn", "fraudnet", "lenet", "logreg", "mlp", "resnet_gn"]


def test_registering_a_taken_name_is_refused_and_keeps_the_original():
    def other(input_shape, num_classes):
        return nn.Linear(1, 1)

    with pytest.raises(ValueError, match="model 'mlp' is already registered"):
        MODELS.register("mlp")(other)
    assert num_params(build_model("mlp", input_shape=(50,), num_classes=10)) == 3914


def test_cnn_has_the_uldp_fl_paper_parameter_count():
    model = build_model("cnn", input_shape=(1, 28, 28), num_classes=10)
    # reference/004_uldp_fl.md §4.2: CNNMnist has 21 840 parameters (260 + 5 020 + 16 050 + 510).
    assert num_params(model) == 21_840
    assert [p.numel() for p in model.parameters()] == [250, 10, 5000, 20, 16000, 50, 500, 10]


def test_parameter_counts_of_the_other_models():
    # reference/000_isrl_dp.md §6.2: the ISRL-DP MNIST MLP(50, 64, 2) has d = 3394.
    assert num_params(build_model("mlp", input_shape=(50,), num_classes=2, hidden=[64])) == 3394
    two_hidden = build_model("mlp", input_shape=(50,), num_classes=10, hidden=[64, 32])
    assert num_params(two_hidden) == 3264 + 2080 + 330
    assert num_params(build_model("logreg", input_shape=(13,), num_classes=2)) == 28
    # LeNet-5 on 28×28: 156 + 2 416 + 48 120 + 10 164 + 850.
    assert num_params(build_model("lenet", input_shape=(1, 28, 28), num_classes=10)) == 61_706
    # reference/000_isrl_dp.md §6.3, the CIFAR-10 tutorial net: 456 + 2 416 + 48 120 + 10 164 + 850.
    assert num_params(build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10)) == 62_006


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_outputs_one_logit_per_class(name):
    model = build_model(name, input_shape=SHAPES[name], num_classes=7)
    x = torch.zeros(3, *SHAPES[name])
    assert model(x).shape == (3, 7)


def test_cnn_accepts_images_without_a_channel_dimension():
    a = build_model("cnn", input_shape=(28, 28), num_classes=10, seed=4)
    b = build_model("cnn", input_shape=(1, 28, 28), num_classes=10, seed=4)
    x = torch.linspace(-1, 1, 2 * 784).reshape(2, 28, 28)
    torch.testing.assert_close(a(x), b(x.unsqueeze(1)))


def test_building_a_model_imports_no_sympy():
    """The meta device's first use imports sympy, 0.4 s of every CLI run: models are built without it."""
    probe = (
        "import sys; from dpfl.models import build_model; "
        "build_model('cnn', input_shape=(28, 28), num_classes=10); print('sympy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_same_seed_same_parameters_and_global_rng_untouched(name):
    state = torch.random.get_rng_state()
    a = build_model(name, input_shape=SHAPES[name], num_classes=10, seed=11)
    b = build_model(name, input_shape=SHAPES[name], num_classes=10, seed=11)
    c = build_model(name, input_shape=SHAPES[name], num_classes=10, seed=12)
    assert torch.equal(torch.random.get_rng_state(), state)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    # the drawn parameters differ with the seed (GroupNorm's start at 1 and 0 whatever it is)
    for ma, mc in zip(a.modules(), c.modules(), strict=True):
        for pa, pc in zip(ma.parameters(recurse=False), mc.parameters(recurse=False), strict=True):
            assert isinstance(ma, nn.GroupNorm) or not torch.equal(pa, pc)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_initial_parameters_lie_within_pytorch_default_bounds(name):
    model = build_model(name, input_shape=SHAPES[name], num_classes=10)
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Conv2d):
            bound = 1 / math.sqrt(module.weight[0].numel())
            assert module.weight.abs().max() <= bound
            # resnet_gn's convolutions have none: the GroupNorm after each would cancel it
            assert module.bias is None or module.bias.abs().max() <= bound
            # Uniform on ±bound: the spread is far from degenerate.
            assert module.weight.abs().max() > 0.5 * bound


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_models_hold_no_buffers_batchnorm_or_dropout(name):  # fraudnet's dropout: test_fraudnet.py
    model = build_model(name, input_shape=SHAPES[name], num_classes=10)
    assert list(model.buffers()) == []
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm | nn.Dropout) for m in model.modules())


def test_unknown_option_names_the_field_and_allowed_options():
    with pytest.raises(SpecError, match="is not an option of model 'mlp'; allowed: hidden") as info:
        build_model("mlp", input_shape=(50,), num_classes=10, width=3)
    assert info.value.field == "model.width"


def test_one_class_is_refused():
    with pytest.raises(SpecError, match=r"must be ≥ 2 \(binary tasks use 2\); got 1") as info:
        build_model("logreg", input_shape=(5,), num_classes=1)
    assert info.value.field == "model.num_classes"


def test_image_models_refuse_flat_inputs():
    with pytest.raises(SpecError) as info:
        build_model("cnn", input_shape=(784,), num_classes=10)
    assert (info.value.field, info.value.reason) == (
        "model.name",
        "must take the dataset's inputs: 'cnn' needs images (H, W) or (C, H, W); got (784,).",
    )


@pytest.mark.parametrize("hidden", [[64, 0], "abc", "64", [64.0], [True], 64, [-1]])
def test_hidden_widths_other_than_positive_integers_are_refused(hidden):
    with pytest.raises(SpecError) as info:
        build_model("mlp", input_shape=(5,), num_classes=2, hidden=hidden)
    assert (info.value.field, info.value.reason) == (
        "model.hidden",
        f"must list positive integer widths, e.g. [64]; got {hidden!r}.",
    )

import torch

from dpfl.engine import ParamLayout, stack_copies
from tests.dpfl.engine.factories import model_and_layout


def test_layout_records_names_shapes_and_offsets():
    model, layout = model_and_layout("mlp")  # 6 → 5 → 4 → 3
    assert layout.names == ("1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias")
    assert layout.shapes == (
        torch.Size([5, 6]),
        torch.Size([5]),
        torch.Size([4, 5]),
        torch.Size([4]),
        torch.Size([3, 4]),
        torch.Size([3]),
    )
    assert layout.offsets == (0, 30, 35, 55, 59, 71)
    assert layout.size == 74 == sum(p.numel() for p in model.parameters())


def test_flatten_then_unflatten_gives_back_every_parameter():
    model, layout = model_and_layout("cnn")
    flat = layout.flatten_module(model)
    assert flat.shape == (layout.size,)
    views = layout.unflatten(flat)
    for name, param in model.named_parameters():
        assert torch.equal(views[name], param)
    assert torch.equal(layout.flatten(views), flat)


def test_unflatten_returns_views_that_share_memory():
    _, layout = model_and_layout("mlp")
    flat = torch.zeros(2, layout.size)
    views = layout.unflatten(flat)
    assert views["3.weight"].shape == (2, 4, 5)
    views["3.weight"][1, 2, 3] = 9.0
    assert flat[1, layout.offsets[2] + 2 * 5 + 3] == 9.0
    assert int((flat != 0).sum()) == 1


def test_flatten_keeps_leading_dimensions():
    _, layout = model_and_layout("logreg")
    shapes = dict(zip(layout.names, layout.shapes, strict=True))
    per_sample = {name: torch.randn(3, 4, *shape) for name, shape in shapes.items()}
    flat = layout.flatten(per_sample)
    assert flat.shape == (3, 4, layout.size)
    assert torch.equal(layout.unflatten(flat)["1.bias"], per_sample["1.bias"])


def test_stack_copies_are_independent():
    model, layout = model_and_layout("logreg")
    flat = layout.flatten_module(model)
    stacked = stack_copies(flat, 3)
    assert stacked.shape == (3, layout.size)
    stacked[0] += 1.0
    assert torch.equal(stacked[1], flat)
    assert torch.equal(stacked[0], flat + 1.0)


def test_load_into_writes_the_module_parameters():
    model, layout = model_and_layout("mlp")
    layout.load_into(model, torch.arange(layout.size, dtype=torch.float32))
    assert model[3].bias[0].item() == 55.0
    expected = torch.arange(layout.size, dtype=torch.float32)
    assert torch.equal(ParamLayout.of(model).flatten_module(model), expected)


def test_flatten_module_is_a_detached_copy():
    model, layout = model_and_layout("logreg")
    flat = layout.flatten_module(model)
    assert not flat.requires_grad
    flat += 1.0
    assert not torch.equal(layout.flatten_module(model), flat)

"""The ULDP-FL paper's Creditcard model (`fraudnet`, the authors' PrivateFraudNet(30, 30, 4)): its
5,012 parameters, per-sample gradients through the engine's generic path equal to autograd's one
sample at a time, dropout's masks drawn per sample and seeded, evaluation without dropout, and a
ULDP-AVG run on card_data Creditcard files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from dpfl import runner
from dpfl.engine import (
    ParamLayout,
    SiloBatch,
    clipped_grad_sum,
    evaluate,
    ghost_clipping_applies,
    mean_grad,
    per_sample_grads,
)
from dpfl.engine.convnet import conv_stack
from dpfl.errors import SpecError
from dpfl.models import build_model, draws_randomness
from dpfl.reproduce.local import _succeeded
from dpfl.spec import parse_spec
from tests.dpfl.test_resnet import autograd_per_sample
from tests.factories import run_cli


def fraudnet(seed: int = 0) -> nn.Module:
    return build_model("fraudnet", input_shape=(30,), num_classes=2, seed=seed)


def test_the_authors_architecture_and_its_5012_parameters():
    model = fraudnet()
    # 5 × (Linear 30→30: 900 + 30, GroupNorm: 30 + 30) + Linear 30→2: 60 + 2 (reference §4.2: 5,012)
    assert sum(p.numel() for p in model.parameters()) == 5 * (930 + 60) + 62 == 5_012
    kinds = [type(m).__name__ for m in model]
    block = ["Linear", "ReLU", "GroupNorm", "Dropout"]
    assert kinds == ["Flatten", "Linear", "ReLU", "GroupNorm", *block * 4, "Linear"]
    assert all(m.num_groups == 1 for m in model if isinstance(m, nn.GroupNorm))  # GroupNorm(1, 30)
    assert all(m.p == 0.5 for m in model if isinstance(m, nn.Dropout))
    assert list(model.buffers()) == []
    assert model(torch.rand(3, 30)).shape == (3, 2)
    assert draws_randomness(model) and not draws_randomness(model.eval())
    assert not draws_randomness(build_model("fraudnet", input_shape=(30,), num_classes=2, dropout=0.0))


def test_the_engine_sends_it_to_the_generic_path():
    model = fraudnet()
    assert conv_stack(model) is None and not ghost_clipping_applies(model)


def batch_of(seed: int = 1) -> tuple[SiloBatch, torch.Generator]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 30, generator=gen)
    y = torch.randint(0, 2, (2, 4), generator=gen)
    mask = torch.tensor([[True, True, True, True], [True, True, True, False]])  # a padded slot
    return SiloBatch(x, y, mask), gen


@pytest.mark.parametrize("shared", [False, True])
def test_engine_gradients_equal_autograd_one_sample_at_a_time_without_dropout(shared):
    model = fraudnet(seed=3).eval()  # dropout off: autograd's masks would be other draws
    layout = ParamLayout.of(model)
    batch, gen = batch_of()
    base = layout.flatten_module(model)
    flat = base if shared else base + 0.2 * base.abs().mean() * torch.randn(2, layout.size, generator=gen)
    expected = autograd_per_sample(model, layout, flat, batch)
    mask = batch.mask
    torch.testing.assert_close(per_sample_grads(model, layout, flat, batch), expected, rtol=1e-5, atol=1e-6)
    norms = expected.norm(dim=-1)
    clip = float(norms[mask].median())  # some samples are clipped, some are not
    assert float(norms[mask].min()) < clip < float(norms[mask].max())
    result = clipped_grad_sum(model, layout, flat, batch, clip=clip)
    factors = (clip / norms.clamp(min=clip)) * mask
    clipped = torch.einsum("sb,sbp->sp", factors, expected)
    # float32 sums of the batch's terms in another order: entries that cancel to a few hundredths
    # are a few 1e-6 apart on some CPUs' kernels (2.4e-6 measured on an AMD EPYC)
    torch.testing.assert_close(result.sum, clipped, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(result.norms, norms * mask, rtol=1e-5, atol=1e-6)
    means = expected.sum(dim=1) / mask.sum(dim=1, keepdim=True)
    torch.testing.assert_close(mean_grad(model, layout, flat, batch), means, rtol=1e-5, atol=1e-6)


def test_dropout_draws_each_samples_own_masks_from_the_seeded_global_generator():
    model = fraudnet(seed=3)  # training mode: dropout on
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    x = torch.randn(1, 30, generator=torch.Generator().manual_seed(2)).expand(1, 6, 30)
    batch = SiloBatch.full(x.contiguous(), torch.ones(1, 6, dtype=torch.long))  # one sample six times

    def grads(seed: int) -> torch.Tensor:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return per_sample_grads(model, layout, flat, batch)

    g = grads(5)
    assert len({tuple(row.tolist()) for row in g[0]}) == 6  # six samples, six draws of masks
    assert torch.equal(g, grads(5)) and not torch.equal(g, grads(6))
    eval_grad = per_sample_grads(model.eval(), layout, flat, batch)[0, 0]
    assert all(not torch.allclose(row, eval_grad) for row in g[0])
    assert model.train().training


def test_with_dropout_every_clipped_sample_has_norm_at_most_c():
    model = fraudnet(seed=4)
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    gen = torch.Generator().manual_seed(8)
    # one sample per silo: each silo's clipped sum is its one sample's clipped gradient
    batch = SiloBatch.full(torch.randn(6, 1, 30, generator=gen), torch.randint(0, 2, (6, 1), generator=gen))
    clip = 0.05
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        result = clipped_grad_sum(model, layout, flat, batch, clip=clip)
    norms = result.sum.norm(dim=-1)
    assert bool((result.norms[:, 0] > clip).all())  # every one is clipped…
    assert float(norms.max()) <= clip * (1 + 1e-5)  # …to norm C
    torch.testing.assert_close(norms, torch.full((6,), clip), rtol=1e-5, atol=0)


def test_evaluation_is_without_dropout_and_leaves_the_mode_as_it_was():
    model = fraudnet(seed=5)
    layout = ParamLayout.of(model)
    flat = layout.flatten_module(model)
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(50, 30, generator=gen), torch.randint(0, 2, (50,), generator=gen)
    state = torch.random.get_rng_state()
    loss, accuracy, _ = evaluate(model, layout, flat, x, y, batch_size=16)
    assert model.training and torch.equal(torch.random.get_rng_state(), state)  # nothing drawn
    with torch.no_grad():
        logits = model.eval()(x)
    assert loss == pytest.approx(float(nn.functional.cross_entropy(logits, y)), rel=1e-6)
    assert accuracy == int((logits.argmax(1) == y).sum()) / 50


@pytest.mark.parametrize(
    ("options", "field", "reason"),
    [
        ({"width": 0}, "model.width", "must be a positive integer; got 0."),
        ({"layers": 2.0}, "model.layers", "must be a positive integer; got 2.0."),
        ({"dropout": 1.0}, "model.dropout", "must be a probability in [0, 1); got 1.0."),
    ],
)
def test_options_outside_the_family_name_the_field(options, field, reason):
    with pytest.raises(SpecError) as info:
        build_model("fraudnet", input_shape=(30,), num_classes=2, **options)
    assert (info.value.field, info.value.reason) == (field, reason)


def uldp_avg_spec() -> dict:
    return {
        "algorithm": "uldp_avg",
        "params": {"global_lr": 10, "clip": 0.1, "local_lr": 0.01, "local_epochs": 1, "batch_size": 16},
        "dataset": {
            "name": "creditcard",
            "silos": 3,
            "users": {"kind": "zipf", "count": 12, "zipf_alpha": 0.5, "silo_alpha": 2.0},
        },
        "model": {"name": "fraudnet"},
        "rounds": 2,
        "privacy": {"epsilon": 4.0, "delta": 1e-5},
        "seed": 1,
    }


def test_a_uldp_avg_run_trains_it_seeded_by_the_spec(card_data):
    spec = parse_spec(uldp_avg_spec())
    state = torch.random.get_rng_state()
    result = runner.run(spec, data_dirs=[card_data], device="cpu")
    assert torch.equal(torch.random.get_rng_state(), state)  # the runner forks the generator it seeds
    assert result.epsilon is not None and 3.9 < result.epsilon <= 4.0 + 1e-9
    assert result.final_params.numel() == 5_012 and bool(torch.isfinite(result.final_params).all())
    initial = fraudnet(seed=1)
    assert not torch.equal(result.final_params, ParamLayout.of(initial).flatten_module(initial))
    torch.manual_seed(123)  # another global state: the same numbers
    again = runner.run(spec, data_dirs=[card_data], device="cpu")
    assert torch.equal(again.final_params, result.final_params)
    other = runner.run(parse_spec({**uldp_avg_spec(), "seed": 2}), data_dirs=[card_data], device="cpu")
    assert not np.array_equal(other.final_params.numpy(), result.final_params.numpy())


def test_each_evaluation_records_balanced_accuracy_of_the_final_model(card_data):
    spec = parse_spec(uldp_avg_spec() | {"eval_every": 1})
    result = runner.run(spec, data_dirs=[card_data], device="cpu")
    assert [r.round for r in result.rounds] == [1, 2]
    assert all(r.balanced_accuracy is not None for r in result.rounds)
    data = runner.prepare(spec, data_dirs=[card_data]).data  # the run's own test split: 60 rows, 6 frauds
    assert (len(data.y_test), int(data.y_test.sum())) == (60, 6)
    model = fraudnet()
    ParamLayout.of(model).load_into(model, result.final_params)
    with torch.no_grad():
        predicted = model.eval()(torch.as_tensor(data.x_test)).argmax(1)
    y = torch.as_tensor(data.y_test)
    recalls = [int(((predicted == k) & (y == k)).sum()) / int((y == k).sum()) for k in (0, 1)]
    assert result.final.balanced_accuracy == pytest.approx(sum(recalls) / 2, abs=1e-12)
    assert result.final.accuracy == pytest.approx(int((predicted == y).sum()) / 60, abs=1e-12)
    # a reproduction reports Creditcard's headline metric, balanced accuracy, as its accuracy
    where = {"setting": "creditcard", "algorithm": "uldp_avg", "x": 5.0, "variant": (), "seed": 1}
    outcome = _succeeded(where, result)
    assert outcome.accuracy == result.final.balanced_accuracy != result.final.accuracy
    assert outcome.curve == tuple((r.round, r.balanced_accuracy, r.loss) for r in result.rounds)


def test_dpfl_run_of_the_creditcard_setting_writes_balanced_accuracy(
    card_data, capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("DPFL_DATA_DIR", str(card_data))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    path, out = tmp_path / "spec.json", tmp_path / "result.json"
    path.write_text(json.dumps(uldp_avg_spec()))
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(out), "--device", "cpu")
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["spec"]["model"] == {"name": "fraudnet"} and data["spec"]["algorithm"] == "uldp_avg"
    final = data["final"]
    assert final["round"] == 2 and 0.0 <= final["balanced_accuracy"] <= 1.0
    assert data["rounds"][-1]["balanced_accuracy"] == final["balanced_accuracy"]
    assert f"final accuracy {final['accuracy']:.4f}, balanced accuracy {final['balanced_accuracy']:.4f}," in (
        " ".join(err.split())
    )

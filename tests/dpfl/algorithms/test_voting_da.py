"""AE-DPFL+DA (reference/003_voting_dpfl.md §2.2): the gradient reversal layer, domain-adversarial
training of all agents at once, and a Digits-like run whose public pool is another domain."""

from __future__ import annotations

import bz2
import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits
from torch.func import grad, vmap

import dpfl.engine.blocks as engine_blocks
from dpfl.algorithms.voting import clear_vote_cache
from dpfl.algorithms.voting.adaptation import (
    annealed_rate,
    domain_head,
    reversal_weight,
    reverse_gradient,
    train_dann,
)
from dpfl.algorithms.voting.training import train_sgd
from dpfl.algorithms.voting.votes import predicted_labels
from dpfl.data.files import file_digest
from dpfl.data.loaders import digit_domains, mnist
from dpfl.engine import ParamLayout
from dpfl.errors import SpecError
from dpfl.models import build_model
from dpfl.runner import prepare, run
from dpfl.spec import parse_spec
from tests.factories import data_dir

_IMAGES, _LABELS = 0x00000803, 0x00000801


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(threads)


def _mnist(split: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns the first `count` real MNIST images (uint8 [n, 28, 28]) and labels of `split`."""
    prefix = "train" if split == "train" else "t10k"
    folder = data_dir() / "mnist"
    images = mnist.read_idx(folder / f"{prefix}-images-idx3-ubyte.gz", magic=_IMAGES)[:count]
    labels = mnist.read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", magic=_LABELS)[:count]
    return np.array(images), np.array(labels, dtype=np.int64)


def _rescaled(images: np.ndarray, *, side: int, frame: int) -> torch.Tensor:
    """MNIST's 20×20 digit box resized (area) to `side` and centred in a `frame`-sided black image,
    in [0, 1]: the same digits at another scale and resolution, a domain shift."""
    box = torch.as_tensor(images[:, 4:24, 4:24], dtype=torch.float32).unsqueeze(1) / 255
    pad = (frame - side) // 2
    return F.pad(F.interpolate(box, size=(side, side), mode="area"), (pad, frame - side - pad) * 2)[:, 0]


# --- the gradient reversal layer and the schedules ---------------------------------------------------


@pytest.mark.parametrize("weight", [0.0, 0.37, 1.0, 2.5])
def test_gradient_reversal_is_the_identity_forward_and_minus_lambda_times_the_gradient_backward(weight):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, generator=gen, requires_grad=True)
    upstream = torch.randn(6, 5, generator=gen)
    out = reverse_gradient(x, weight)
    assert torch.equal(out, x)
    out.backward(upstream)
    assert torch.equal(x.grad, -weight * upstream)  # exact: one multiplication by −λ
    # the same under torch.func, vmapped over a stack of inputs as the agents' training does
    per_row = vmap(grad(lambda row, up: (reverse_gradient(row, weight) * up).sum()))(x.detach(), upstream)
    assert torch.equal(per_row, -weight * upstream)
    # and with each agent's own λ, as each agent's schedule follows its own steps
    weights = torch.linspace(0.0, weight, 6)
    own = vmap(grad(lambda row, up, w: (reverse_gradient(row, w) * up).sum()))(x.detach(), upstream, weights)
    assert torch.equal(own, -weights.unsqueeze(1) * upstream)


def test_the_schedules_are_ganins():
    # Ganin et al. 2016 §5.2.2: λ_p = 2/(1 + exp(−10p)) − 1, μ_p = μ0/(1 + 10p)^0.75
    assert reversal_weight(0.0) == 0.0
    assert reversal_weight(0.5) == pytest.approx(2 / (1 + math.exp(-5)) - 1, abs=1e-15)
    assert reversal_weight(1.0) == pytest.approx(0.9999092042625951, abs=1e-15)
    assert reversal_weight(1.0, gamma=0.0) == 0.0
    assert annealed_rate(0.05, 0.0) == 0.05
    assert annealed_rate(0.05, 1.0) == pytest.approx(0.05 / 11**0.75, rel=1e-15)


# --- domain-adversarial training of all agents at once -----------------------------------------------


def _shifted_mnist(
    agents: int, records: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns real MNIST source records [agents·records, 784] and labels, and a target domain: the
    test digits shrunk to 16×16 in a 28×28 frame [2000, 784] and their labels (for scoring only)."""
    images, labels = _mnist("train", agents * records)
    test, test_labels = _mnist("test", 2000)
    source = torch.as_tensor(images, dtype=torch.float32).reshape(len(images), -1) / 255
    target = _rescaled(test, side=16, frame=28).reshape(len(test), -1)
    return source, torch.as_tensor(labels), target, torch.as_tensor(test_labels)


def test_dann_trains_the_domain_head_and_the_label_loss_still_drops_on_shifted_real_digits():
    agents, records = 6, 300
    x, y, target, target_y = _shifted_mnist(agents, records)
    model = build_model("mlp", input_shape=(784,), num_classes=10, hidden=[64], seed=0)
    layout, head = ParamLayout.of(model), domain_head(64, hidden=100, seed=0)
    rows = [torch.arange(a * records, (a + 1) * records) for a in range(agents)]
    init = layout.flatten_module(model).expand(agents, -1).clone()
    kwargs = {"epochs": 10, "batch_size": 32, "lr": 0.05, "momentum": 0.9, "seed": 3, "stream": 8}
    pool, scored = target[:1000], target[1000:]
    dann = train_dann(model, layout, head, init, x, y, rows, pool, gamma=10.0, target_stream=10, **kwargs)
    blind = train_dann(model, layout, head, init, x, y, rows, pool, gamma=0.0, target_stream=10, **kwargs)

    # the label loss drops (each agent's mean over its first and its last epoch) ...
    assert (dann.label_loss[-1] < 0.25 * dann.label_loss[0]).all()
    # ... while the domain head learns: its loss falls from ln 2 before the reversal grows (λ_p) ...
    assert (dann.domain_loss[0] - math.log(2)).abs().max() < 0.01
    assert (dann.domain_loss.min(0).values < dann.domain_loss[0] - 0.05).all()
    # ... as far as it falls with the reversal off (λ = 0), where it ends far lower: the reversed
    # gradient keeps the features from giving the domain away
    assert (blind.domain_loss[-1] < 0.65 * blind.domain_loss[0]).all()
    assert (dann.domain_loss[-1] > blind.domain_loss[-1] + 0.1).all()  # measured ≥ 0.17 apart

    # and the adapted agents label the target domain better than plainly trained ones (same draws)
    plain = train_sgd(model, layout, init, x, y, rows, **kwargs)
    right = [
        (predicted_labels(model, layout, w, scored) == target_y[1000:]).float().mean().item()
        for w in (plain, dann.models)
    ]
    assert right[1] > right[0] + 0.03, right  # measured 0.561 plain, 0.627 adapted


def test_a_record_added_to_the_largest_agent_moves_its_dann_model_alone():
    # as plain local training (test_voting.py): each agent's steps and schedule (λ_p, μ_p) are its own
    model = build_model("mlp", input_shape=(20,), num_classes=4, hidden=[8], seed=0)
    layout, head = ParamLayout.of(model), domain_head(8, hidden=5, seed=1)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(60, 20, generator=gen), torch.randint(0, 4, (60,), generator=gen)
    target = torch.rand(30, 20, generator=gen) + 0.5
    rows = [torch.arange(0, 24), torch.arange(24, 29), torch.arange(29, 45)]
    added = [torch.cat([rows[0], torch.tensor([50])]), *rows[1:]]
    init = layout.flatten_module(model).expand(3, -1).clone()
    kwargs = {"epochs": 3, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "gamma": 10.0, "seed": 5}
    before, after = (
        train_dann(model, layout, head, init, x, y, r, target, stream=8, target_stream=10, **kwargs)
        for r in (rows, added)
    )
    torch.testing.assert_close(after.models[1:], before.models[1:], rtol=0, atol=1e-6)
    torch.testing.assert_close(after.heads[1:], before.heads[1:], rtol=0, atol=1e-6)
    assert (after.models[0] - before.models[0]).abs().max() > 1e-3


def test_dann_agents_train_as_they_would_alone(monkeypatch):
    model = build_model("mlp", input_shape=(20,), num_classes=4, hidden=[8], seed=0)
    layout, head = ParamLayout.of(model), domain_head(8, hidden=5, seed=1)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(50, 20, generator=gen), torch.randint(0, 4, (50,), generator=gen)
    target = torch.rand(30, 20, generator=gen) + 0.5
    rows = [torch.arange(0, 20), torch.arange(20, 25), torch.arange(25, 50), torch.arange(0, 0)]
    init = layout.flatten_module(model).expand(4, -1).clone()
    kwargs = {"epochs": 3, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "gamma": 10.0, "seed": 5}
    together = train_dann(model, layout, head, init, x, y, rows, target, stream=8, target_stream=10, **kwargs)
    monkeypatch.setattr(engine_blocks, "CACHE_BYTES", 1)  # one agent per block
    alone = train_dann(model, layout, head, init, x, y, rows, target, stream=8, target_stream=10, **kwargs)
    torch.testing.assert_close(alone.models, together.models, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(alone.heads, together.heads, rtol=1e-5, atol=1e-6)
    assert torch.equal(together.models[3], init[3])  # an agent without records keeps its model
    assert not torch.equal(together.models[0], together.models[2])


# --- an AE-DPFL+DA run whose public pool is another domain --------------------------------------------


@pytest.fixture
def shifted_digits(tmp_path, monkeypatch) -> Path:
    """The Digits task's files made of real MNIST digits: MNIST's training files as they are; an
    SVHN-format file of other MNIST training digits (grey in all three channels); USPS-format files
    of MNIST test digits filling 12×12 of a 16×16 frame (larger and coarser than the agents' digits
    once doubled to 32×32: the server's domain)."""
    folder = tmp_path / "data"
    (folder / "mnist").mkdir(parents=True)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        shutil.copy(data_dir() / "mnist" / name, folder / "mnist" / name)
    images, labels = _mnist("train", 52_000)
    digits = np.pad(images[50_000:], ((0, 0), (2, 2), (2, 2)))
    (folder / "svhn").mkdir()
    svhn = np.repeat(digits[:, :, :, None], 3, axis=3).transpose(1, 2, 3, 0)  # [32, 32, 3, N]
    scipy.io.savemat(
        folder / "svhn/train_32x32.mat",
        {"X": svhn, "y": np.where(labels[50_000:], labels[50_000:], 10)[:, None]},
    )
    test, test_labels = _mnist("test", 2000)
    pixels = _rescaled(test, side=12, frame=16).reshape(len(test), -1).numpy() * 2 - 1
    (folder / "usps").mkdir()
    for name, part in (("usps.bz2", slice(0, 1500)), ("usps.t.bz2", slice(1500, 2000))):
        lines = [
            f"{label + 1} " + " ".join(f"{i + 1}:{v:.4f}" for i, v in enumerate(row)) + "\n"
            for label, row in zip(test_labels[part], pixels[part], strict=True)
        ]
        (folder / "usps" / name).write_bytes(bz2.compress("".join(lines).encode("ascii")))
    specs = tuple(
        dataclasses.replace(spec, md5=file_digest(folder / spec.relpath, "md5"), sha256="")
        if (folder / spec.relpath).exists()
        else spec
        for spec in digit_domains.DIGIT_DOMAINS_FILES
    )
    monkeypatch.setattr(digit_domains, "DIGIT_DOMAINS_FILES", specs)
    return folder


def _digits_spec(algorithm: str, **overrides) -> dict:
    options = {
        "svhn_agents": 4,
        "svhn_records": 300,
        "mnist_agents": 6,
        "mnist_records": 300,
        "svhn_extra": False,
    }
    return {
        "algorithm": algorithm,
        "params": {"public_pool": 1000, "queries": 300, "local_epochs": 10, "student_epochs": 20},
        "dataset": {
            "name": "digit_domains",
            "silos": 10,
            "partition": {"kind": "natural"},
            "options": options,
        },
        "model": {"name": "mlp", "hidden": [64]},
        "rounds": 2,
        "privacy": {"epsilon": 50.0, "delta": 1e-3},
        "seed": 0,
    } | overrides


def test_ae_dpfl_da_on_another_domains_pool_spends_exactly_ae_dpfls_epsilon(shifted_digits):
    clear_vote_cache()
    plain = run(parse_spec(_digits_spec("ae_dpfl")), data_dirs=[shifted_digits], device="cpu")
    adapted = run(parse_spec(_digits_spec("ae_dpfl_da")), data_dirs=[shifted_digits], device="cpu")

    # the same releases: one vote per query under the same σ and sensitivity, so the same ε
    public = [
        [(e.round, e.party, e.event.noise_std, e.event.sensitivity) for e in r.ledger.entries]
        for r in (plain, adapted)
    ]
    assert public[0] == public[1] and len(public[0]) == 300
    assert adapted.epsilon == pytest.approx(plain.epsilon, rel=1e-12)  # the grouping of histograms
    assert (
        adapted.final.metrics["epsilon_data_independent"] == plain.final.metrics["epsilon_data_independent"]
    )
    assert adapted.final.metrics["votes_cached"] == 0.0  # its own votes, not AE-DPFL's from the cache
    kinds = {c.kind: c for c in adapted.privacy.caveats}
    assert set(kinds) == {c.kind for c in plain.privacy.caveats} | {"public_data"}
    assert not kinds["public_data"].breaks_guarantee and adapted.privacy.guaranteed
    assert "the ledger is AE-DPFL's" in kinds["public_data"].text

    # a student that reads the other domain (1,000 USPS-like digits left for testing)
    assert sum(adapted.test_label_histogram) == 1000
    assert adapted.final.accuracy > 0.6, adapted.final.accuracy  # measured 0.707 (AE-DPFL: 0.728)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"name": "logreg"},
            "`model.name` must have trained layers below its last linear layer for ae_dpfl_da: its domain "
            "classifier reads those features; 'logreg' has none (use mlp with hidden layers, cnn, lenet, "
            "cifar_cnn or resnet_gn).",
        ),
        (
            {"name": "mlp", "hidden": []},
            "`model.name` must have trained layers below its last linear layer for ae_dpfl_da: its domain "
            "classifier reads those features; 'mlp' has none (use mlp with hidden layers, cnn, lenet, "
            "cifar_cnn or resnet_gn).",
        ),
    ],
)
def test_a_model_without_features_to_adapt_is_refused_naming_the_field(model, message):
    spec = {
        "algorithm": "ae_dpfl_da",
        "params": {"public_pool": 100, "queries": 50},
        "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
        "model": model,
        "rounds": 2,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-3},
    }
    with pytest.raises(SpecError) as info:
        prepare(parse_spec(spec))
    assert str(info.value) == message


def test_domain_adaptation_is_not_an_option_of_the_other_voting_methods():
    spec = {
        "algorithm": "knn_dpfl",
        "params": {"public_pool": 100, "queries": 50, "domain_hidden": 100},
        "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
        "model": {"name": "mlp", "hidden": [16]},
        "rounds": 2,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-3},
    }
    with pytest.raises(SpecError) as info:
        prepare(parse_spec(spec))
    assert info.value.field == "params.domain_hidden"

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from dpfl.engine import (
    ClippedSum,
    ParamLayout,
    SiloBatch,
    clipped_grad_sum,
    evaluate,
    ghost_clipping_applies,
    mean_grad,
    per_sample_grads,
)
from tests.dpfl.engine.factories import (
    CASES,
    loop_per_sample_grads,
    model_and_layout,
    random_batch,
    silo_params,
    unequal_batch,
)

ALL = sorted(CASES)
LINEAR = ["logreg", "mlp"]


def close(actual, expected, rtol=1e-5, atol=1e-6):
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Returns the largest ‖actual − expected‖ / ‖expected‖ over silos (rows)."""
    return float(((actual - expected).norm(dim=-1) / expected.norm(dim=-1)).max())


def reference_clipped(grads: torch.Tensor, clip: float) -> torch.Tensor:
    """Clips each per-sample gradient [S, B, P] to norm ≤ clip, one at a time, and sums per silo."""
    out = torch.zeros(grads.shape[0], grads.shape[2])
    for s in range(grads.shape[0]):
        for g in grads[s]:
            norm = g.norm()
            out[s] += g * min(1.0, clip / norm.item()) if norm > 0 else g
    return out


@pytest.mark.parametrize("name", ALL)
def test_per_sample_grads_equal_a_backward_per_sample(name):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=3)
    batch = random_batch(name, num_silos=3, batch_size=4)
    expected = loop_per_sample_grads(model, layout, flat, batch)
    assert float(expected.abs().max()) > 0.1  # gradients of a meaningful size
    close(per_sample_grads(model, layout, flat, batch), expected, rtol=0.0, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_shared_parameters_equal_stacked_copies(name):
    model, layout = model_and_layout(name)
    flat = layout.flatten_module(model)
    batch = random_batch(name, num_silos=3, batch_size=5)
    stacked = flat.expand(3, -1)
    close(per_sample_grads(model, layout, flat, batch), per_sample_grads(model, layout, stacked, batch))
    close(
        clipped_grad_sum(model, layout, flat, batch, clip=0.1).sum,
        clipped_grad_sum(model, layout, stacked, batch, clip=0.1).sum,
    )
    close(mean_grad(model, layout, flat, batch), mean_grad(model, layout, stacked, batch))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("clip", [1e-3, 0.05, 1e3])
def test_clipped_sum_equals_clipping_each_sample_alone(name, clip):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=3)
    batch = random_batch(name, num_silos=3, batch_size=6)
    grads = loop_per_sample_grads(model, layout, flat, batch)
    result = clipped_grad_sum(model, layout, flat, batch, clip=clip)
    close(result.sum, reference_clipped(grads, clip), rtol=1e-5, atol=1e-6)
    close(result.norms, grads.norm(dim=-1), rtol=1e-5, atol=1e-6)
    assert result.count.tolist() == [6, 6, 6]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("method", ["per_sample", "auto"])
def test_clipping_bounds_hold(name, method):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=4)
    batch = random_batch(name, num_silos=4, batch_size=8, scale=30.0)  # large inputs, large gradients
    clip = 0.01
    result = clipped_grad_sum(model, layout, flat, batch, clip=clip, method=method)
    clipped_norms = result.norms * (clip / result.norms.clamp(min=clip))
    assert float((result.norms > clip).float().mean()) > 0.75  # the bound is exercised, not vacuous
    assert float(clipped_norms.max()) <= clip + 1e-6
    per_sample = per_sample_grads(model, layout, flat, batch)
    factors = (clip / per_sample.norm(dim=-1).clamp(min=clip)).unsqueeze(-1)
    assert float((per_sample * factors).norm(dim=-1).max()) <= clip + 1e-6
    assert bool((result.sum.norm(dim=1) <= result.count * clip + 1e-6).all())


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    clip=st.floats(min_value=1e-4, max_value=10.0),
    scale=st.floats(min_value=0.01, max_value=100.0),
    seed=st.integers(min_value=0, max_value=2**16),
    sizes=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=4),
)
def test_ghost_clipping_bounds_hold_for_any_clip_and_data(clip, scale, seed, sizes):
    model, layout = model_and_layout("mlp")
    flat = silo_params(model, layout, num_silos=len(sizes), seed=seed)
    batch = unequal_batch("mlp", sizes, seed=seed)
    batch = SiloBatch(batch.x * scale, batch.y, batch.mask)
    result = clipped_grad_sum(model, layout, flat, batch, clip=clip)
    clipped_norms = result.norms * (clip / result.norms.clamp(min=clip))
    assert bool((clipped_norms <= clip + 1e-6).all())
    assert bool((result.sum.norm(dim=1) <= result.count * clip * (1 + 1e-6) + 1e-6).all())
    assert result.count.tolist() == sizes
    assert result.sum.shape == (len(sizes), layout.size)


def test_huge_clip_gives_the_unclipped_sum():
    model, layout = model_and_layout("cnn")
    flat = silo_params(model, layout, num_silos=2)
    batch = random_batch("cnn", num_silos=2, batch_size=5)
    result = clipped_grad_sum(model, layout, flat, batch, clip=1e9)
    close(result.sum, 5 * mean_grad(model, layout, flat, batch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", LINEAR)
@pytest.mark.parametrize("clip", [1e-4, 0.02, 1e4])
@pytest.mark.parametrize("shared", [False, True])
def test_ghost_clipping_equals_the_per_sample_path(name, clip, shared):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=5)
    flat = flat[0] if shared else flat
    batch = random_batch(name, num_silos=5, batch_size=9, scale=3.0)
    ghost = clipped_grad_sum(model, layout, flat, batch, clip=clip, method="ghost")
    generic = clipped_grad_sum(model, layout, flat, batch, clip=clip, method="per_sample")
    assert relative_error(ghost.sum, generic.sum) <= 1e-5
    assert relative_error(ghost.norms, generic.norms) <= 1e-5
    assert torch.equal(ghost.count, generic.count)


LINEAR_STACKS = {
    "tanh, no bias, trailing sigmoid": lambda: nn.Sequential(
        nn.Flatten(), nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3, bias=False), nn.Sigmoid()
    ),
    "relu then sigmoid": lambda: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Sigmoid(), nn.Linear(5, 3)),
    "leaky relu, identity": lambda: nn.Sequential(
        nn.Linear(6, 5), nn.LeakyReLU(0.2), nn.Identity(), nn.Linear(5, 3)
    ),
    "negative leaky slope (vjp)": lambda: nn.Sequential(nn.Linear(6, 5), nn.LeakyReLU(-0.5), nn.Linear(5, 3)),
    "gelu and silu (vjp)": lambda: nn.Sequential(
        nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 4), nn.SiLU(), nn.Linear(4, 3)
    ),
    "activation on the input, two linears in a row": lambda: nn.Sequential(
        nn.Tanh(), nn.Linear(6, 5), nn.Linear(5, 3)
    ),
}


@pytest.mark.parametrize("build", LINEAR_STACKS.values(), ids=LINEAR_STACKS.keys())
@pytest.mark.parametrize("shared", [False, True])
def test_ghost_clipping_handles_other_linear_stacks(build, shared):
    torch.manual_seed(0)
    model = build()
    layout = ParamLayout.of(model)
    assert ghost_clipping_applies(model)
    flat = silo_params(model, layout, num_silos=2)
    flat = flat[0] if shared else flat
    batch = random_batch("mlp", num_silos=2, batch_size=7)
    features = batch.x.clone()
    ghost = clipped_grad_sum(model, layout, flat, batch, clip=0.05, method="ghost")
    generic = clipped_grad_sum(model, layout, flat, batch, clip=0.05, method="per_sample")
    assert relative_error(ghost.sum, generic.sum) <= 1e-5
    assert torch.equal(batch.x, features)  # the caller's features are never overwritten
    expected = per_sample_grads(model, layout, flat, batch).mean(dim=1)
    assert relative_error(mean_grad(model, layout, flat, batch), expected) <= 1e-5


def test_ghost_clipping_does_not_apply_to_dropout_or_batchnorm():
    assert not ghost_clipping_applies(nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 2)))
    assert not ghost_clipping_applies(nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)))
    assert not ghost_clipping_applies(nn.Sequential(nn.Flatten(start_dim=2), nn.Linear(3, 2)))
    # a module used twice is listed once by named_children; a subclass may have its own forward
    relu = nn.ReLU()
    shared = nn.Sequential(nn.Linear(3, 3), relu, nn.Linear(3, 3), relu, nn.Linear(3, 2))
    assert not ghost_clipping_applies(shared)
    assert not ghost_clipping_applies(nn.Sequential(type("Scaled", (nn.Linear,), {})(3, 2)))
    assert not ghost_clipping_applies(nn.Sequential(nn.Linear(3, 3), nn.ELU(inplace=True), nn.Linear(3, 2)))


def test_ghost_clipping_applies_to_linear_models_only():
    assert [n for n in ALL if ghost_clipping_applies(model_and_layout(n)[0])] == ["logreg", "mlp"]
    with pytest.raises(ValueError, match="method='ghost' needs a Sequential of Linear layers"):
        model, layout = model_and_layout("cnn")
        clipped_grad_sum(
            model, layout, layout.flatten_module(model), random_batch("cnn", 1, 2), clip=1.0, method="ghost"
        )


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("method", ["per_sample", "auto"])
def test_padded_samples_contribute_nothing(name, method):
    model, layout = model_and_layout(name)
    sizes = [5, 1, 3]
    flat = silo_params(model, layout, num_silos=len(sizes))
    # Finite garbage in the padding must not leak into any result.
    padded = unequal_batch(name, sizes, padding=7.0)
    together = clipped_grad_sum(model, layout, flat, padded, clip=0.05, method=method)
    means = mean_grad(model, layout, flat, padded)
    grads = per_sample_grads(model, layout, flat, padded)
    assert together.count.tolist() == sizes
    assert bool((grads[~padded.mask] == 0).all())
    assert bool((together.norms[~padded.mask] == 0).all())
    for s in range(len(sizes)):
        alone_batch = padded.silo(s)
        assert alone_batch.x.shape[1] == sizes[s]
        alone = clipped_grad_sum(model, layout, flat[s : s + 1], alone_batch, clip=0.05, method=method)
        close(together.sum[s], alone.sum[0])
        close(means[s], mean_grad(model, layout, flat[s : s + 1], alone_batch)[0])


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_a_silo_without_samples_gets_zeros(name):
    model, layout = model_and_layout(name)
    batch = unequal_batch(name, [3, 0])
    flat = silo_params(model, layout, num_silos=2)
    assert float(clipped_grad_sum(model, layout, flat, batch, clip=1.0).sum[1].abs().max()) == 0.0
    assert float(mean_grad(model, layout, flat, batch)[1].abs().max()) == 0.0


@pytest.mark.parametrize("name", ALL)
def test_mean_grad_is_the_mean_of_per_sample_grads(name):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=3)
    batch = unequal_batch(name, [4, 2, 3])
    grads = loop_per_sample_grads(model, layout, flat, batch)
    expected = grads.sum(dim=1) / batch.counts().unsqueeze(1)
    close(mean_grad(model, layout, flat, batch), expected)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_chunking_under_a_small_memory_budget_changes_nothing(name):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=3)
    batch = unequal_batch(name, [4, 1, 3])
    tiny = 1  # forces one sample of one silo per chunk
    for method in ["per_sample", "auto"]:
        whole = clipped_grad_sum(model, layout, flat, batch, clip=0.05, method=method)
        chunked = clipped_grad_sum(
            model, layout, flat, batch, clip=0.05, method=method, memory_budget_bytes=tiny
        )
        close(chunked.sum, whole.sum)
        close(chunked.norms, whole.norms)
    close(
        per_sample_grads(model, layout, flat, batch, memory_budget_bytes=tiny),
        per_sample_grads(model, layout, flat, batch),
    )
    close(
        mean_grad(model, layout, flat, batch, memory_budget_bytes=tiny), mean_grad(model, layout, flat, batch)
    )


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_each_silo_result_does_not_depend_on_the_other_silos(name):
    model, layout = model_and_layout(name)
    flat = silo_params(model, layout, num_silos=4)
    batch = random_batch(name, num_silos=4, batch_size=5)
    order = [2, 0, 3]
    subset = SiloBatch(batch.x[order], batch.y[order], batch.mask[order])
    close(
        clipped_grad_sum(model, layout, flat[order], subset, clip=0.1).sum,
        clipped_grad_sum(model, layout, flat, batch, clip=0.1).sum[order],
    )


@pytest.mark.parametrize("name", ALL)
def test_evaluate_matches_a_manual_forward(name):
    model, layout = model_and_layout(name, seed=5)
    batch = random_batch(name, num_silos=1, batch_size=23)
    x, y = batch.x[0], batch.y[0]
    flat = layout.flatten_module(model)
    loss, accuracy, _ = evaluate(model, layout, flat, x, y, batch_size=5)
    with torch.no_grad():
        logits = model(x)
    assert accuracy == pytest.approx(int((logits.argmax(1) == y).sum()) / 23, abs=1e-12)
    assert loss == pytest.approx(F.cross_entropy(logits, y).item(), rel=1e-5)
    from_numpy = evaluate(model, layout, flat, x.numpy(), y.numpy(), batch_size=100)
    assert from_numpy[:2] == pytest.approx((loss, accuracy))


def test_evaluate_counts_exact_accuracy_on_a_known_model():
    # logits = x itself: the prediction is the argmax of the features.
    model = nn.Sequential(nn.Linear(3, 3))
    layout = ParamLayout.of(model)
    flat = torch.cat([torch.eye(3).reshape(-1), torch.zeros(3)])
    x = torch.tensor([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 3.0], [5.0, 0, 0]])
    y = torch.tensor([0, 1, 0, 2])
    result = evaluate(model, layout, flat, x, y, batch_size=3)
    assert result.accuracy == 0.5
    # recalls: class 0 1/2 (row 2 predicted 2), class 1 1/1, class 2 0/1 (predicted 0)
    assert result.balanced_accuracy == (1 / 2 + 1 + 0) / 3


def test_bad_arguments_say_what_is_allowed():
    model, layout = model_and_layout("mlp")
    flat = layout.flatten_module(model)
    batch = random_batch("mlp", num_silos=2, batch_size=3)
    with pytest.raises(ValueError, match="clip must be a positive finite number; got 0"):
        clipped_grad_sum(model, layout, flat, batch, clip=0)
    with pytest.raises(ValueError, match="method must be 'auto', 'ghost' or 'per_sample'; got 'fast'"):
        clipped_grad_sum(model, layout, flat, batch, clip=1.0, method="fast")
    with pytest.raises(ValueError, match=rf"flat_params must be \[P\] = \({layout.size},\) or \[S, P\]"):
        mean_grad(model, layout, flat.expand(3, -1), batch)
    with pytest.raises(ValueError, match=r"evaluate takes one model's flat parameters \[P\]"):
        evaluate(model, layout, flat.expand(2, -1), batch.x[0], batch.y[0], batch_size=2)


def test_clipped_sum_is_a_frozen_record():
    model, layout = model_and_layout("logreg")
    batch = random_batch("logreg", 1, 2)
    result = clipped_grad_sum(model, layout, layout.flatten_module(model), batch, clip=1.0)
    assert isinstance(result, ClippedSum)
    with pytest.raises(AttributeError):
        result.sum = None

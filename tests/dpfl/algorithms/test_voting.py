"""Voting-based private FL (reference/003_voting_dpfl.md): votes, noisy argmax, accounting, AE/kNN runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm
from threadpoolctl import threadpool_limits
from torch.func import functional_call

from dpfl.algorithms.voting import clear_vote_cache, query_table, vote_sensitivity
from dpfl.algorithms.voting.training import train_sgd
from dpfl.algorithms.voting.votes import knn_votes, noisy_argmax, one_hot_votes, predicted_labels
from dpfl.data.transforms import pca_components
from dpfl.engine import ParamLayout
from dpfl.errors import SpecError
from dpfl.models import build_model
from dpfl.privacy.events import VoteEvent
from dpfl.runner import prepare, run
from dpfl.spec import parse_spec
from tests.factories import data_dir


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Two cores shared by many processes: one thread per pool (torch's and BLAS's) avoids the
    # oversubscription stalls that make a 784×784 eigendecomposition take seconds.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(threads)


def _digits(algorithm: str, params: dict, privacy: dict, **overrides) -> dict:
    return {
        "algorithm": algorithm,
        "params": params,
        "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
        "model": {"name": "mlp", "hidden": [32]},
        "rounds": 4,
        "eval_every": 2,
        "privacy": privacy,
        "seed": 0,
    } | overrides


# --- votes against loops ---------------------------------------------------------------------------


def test_one_hot_votes_match_a_loop_over_agents_and_records():
    model = build_model("mlp", input_shape=(12,), num_classes=5, hidden=[8], seed=0)
    layout = ParamLayout.of(model)
    params = torch.randn(6, layout.size, generator=torch.Generator().manual_seed(1))
    x = torch.randn(30, 12, generator=torch.Generator().manual_seed(2))
    counts = one_hot_votes(predicted_labels(model, layout, params, x), 5)
    expected = torch.zeros(30, 5, dtype=torch.float64)
    for agent in range(6):
        for i in range(30):
            logits = functional_call(model, layout.unflatten(params[agent]), (x[i : i + 1],))
            expected[i, int(logits.argmax())] += 1
    assert torch.equal(counts, expected)
    assert counts.sum(1).eq(6).all() and len(counts.sum(0).nonzero()) > 1


def test_knn_votes_match_a_loop_over_agents_and_queries():
    gen = np.random.default_rng(3)
    features = gen.normal(size=(60, 6)).astype(np.float32)
    labels = gen.integers(0, 4, size=60)
    rows = [np.arange(0, 12), np.arange(12, 32), np.arange(32, 47), np.arange(47, 60)]  # uneven agents
    queries = gen.normal(size=(25, 6)).astype(np.float32)
    k = 5
    counts = knn_votes(
        torch.as_tensor(features),
        torch.as_tensor(labels),
        [torch.as_tensor(r) for r in rows],
        torch.as_tensor(queries),
        k=k,
        num_classes=4,
    )
    expected = np.zeros((25, 4))
    for r in rows:
        for q in range(25):
            dist = np.linalg.norm(features[r].astype(float) - queries[q].astype(float), axis=1)
            for j in np.argsort(dist)[:k]:
                expected[q, labels[r][j]] += 1 / k
    np.testing.assert_allclose(counts.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(counts.sum(1).numpy(), 4.0)  # each agent's vote is on the simplex


def test_batched_local_training_equals_training_each_agent_alone():
    model = build_model("mlp", input_shape=(64,), num_classes=10, hidden=[16], seed=0)
    layout = ParamLayout.of(model)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(90, 64, generator=gen), torch.randint(0, 10, (90,), generator=gen)
    rows = [torch.arange(30 * a, 30 * a + 30) for a in range(3)]
    init = torch.stack([layout.flatten_module(model)] * 3)
    kwargs = {"epochs": 3, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "seed": 5, "stream": 8}
    together = train_sgd(model, layout, init, x, y, rows, **kwargs)
    for a in range(3):
        alone = train_sgd(model, layout, init[a : a + 1], x, y, [rows[a]], ids=[a], **kwargs)
        torch.testing.assert_close(together[a], alone[0], rtol=1e-5, atol=1e-6)
    assert not torch.equal(together[0], together[1])


def test_a_record_added_to_the_largest_agent_moves_its_model_alone():
    # Instance-level neighbours: one record more for the largest agent must leave every other
    # agent's model, and so its vote, where it was. When every agent took as many steps an epoch
    # as the largest (⌈24/8⌉ = 3, then ⌈25/8⌉ = 4), all of them moved.
    model = build_model("mlp", input_shape=(64,), num_classes=10, hidden=[16], seed=0)
    layout = ParamLayout.of(model)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(90, 64, generator=gen), torch.randint(0, 10, (90,), generator=gen)
    rows = [torch.arange(0, 24), torch.arange(24, 33), torch.arange(33, 49), torch.arange(0, 0)]
    added = [torch.cat([rows[0], torch.tensor([60])]), *rows[1:]]
    init = torch.stack([layout.flatten_module(model)] * 4)
    kwargs = {"epochs": 3, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "seed": 5, "stream": 8}
    before = train_sgd(model, layout, init, x, y, rows, **kwargs)
    after = train_sgd(model, layout, init, x, y, added, **kwargs)
    torch.testing.assert_close(after[1:], before[1:], rtol=0, atol=1e-6)
    assert (after[0] - before[0]).abs().max() > 1e-3
    # and each agent's model is the one it trains alone, whatever the others hold
    for a in range(3):
        alone = train_sgd(model, layout, init[a : a + 1], x, y, [rows[a]], ids=[a], **kwargs)
        torch.testing.assert_close(before[a], alone[0], rtol=1e-5, atol=1e-6)


def test_local_training_does_not_depend_on_the_blocks_of_agents(monkeypatch):
    import dpfl.engine.blocks as engine_blocks

    model = build_model("mlp", input_shape=(64,), num_classes=10, hidden=[16], seed=0)
    layout = ParamLayout.of(model)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(90, 64, generator=gen), torch.randint(0, 10, (90,), generator=gen)
    rows = [torch.arange(0, 40), torch.arange(40, 45), torch.arange(45, 90), torch.arange(0, 0)]
    init = torch.stack([layout.flatten_module(model)] * 4)
    kwargs = {"epochs": 2, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "seed": 5, "stream": 8}
    one_block = train_sgd(model, layout, init, x, y, rows, **kwargs)
    monkeypatch.setattr(engine_blocks, "CACHE_BYTES", 1)  # one agent per block
    torch.testing.assert_close(train_sgd(model, layout, init, x, y, rows, **kwargs), one_block)
    assert torch.equal(one_block[3], init[3])  # an agent without records keeps its initial model


# --- noisy argmax ----------------------------------------------------------------------------------


def test_noisy_argmax_wins_with_the_gaussian_probability_and_shares_add_to_sigma():
    sigma, agents, gap = 3.0, 25, 4.0
    counts = np.tile([[10.0 + gap, 10.0]], (20_000, 1))
    labels, noisy = noisy_argmax(counts, sigma=sigma, num_agents=agents, seed=0, round=1)
    # Two classes: the top one wins iff Z₂ − Z₁ < gap with Z₂ − Z₁ ~ N(0, 2σ²).
    expected = norm.cdf(gap / (sigma * math.sqrt(2)))
    assert np.mean(labels == 0) == pytest.approx(expected, abs=0.01)
    assert np.std(noisy - counts) == pytest.approx(sigma, rel=0.02)  # N shares of σ²/N sum to σ²
    # Standard normals scaled by σ: another σ gives proportional noise, draw for draw.
    _, noisy_half = noisy_argmax(counts, sigma=sigma / 2, num_agents=agents, seed=0, round=1)
    np.testing.assert_allclose(noisy_half - counts, (noisy - counts) / 2, rtol=1e-9, atol=1e-9)
    _, other_round = noisy_argmax(counts, sigma=sigma, num_agents=agents, seed=0, round=2)
    assert not np.allclose(other_round, noisy)


# --- accounting ------------------------------------------------------------------------------------


def test_sensitivities_per_method_and_level():
    assert vote_sensitivity("ae", "agent") == 1.0
    assert vote_sensitivity("ae", "instance") == pytest.approx(math.sqrt(2))
    assert vote_sensitivity("knn", "agent", k=10) == 1.0
    assert vote_sensitivity("knn", "instance", k=10) == pytest.approx(math.sqrt(2) / 10)  # not √(2/k)


def test_digits_setting_gives_the_papers_epsilon_with_its_conversion():
    spec = parse_spec(
        {
            "algorithm": "ae_dpfl",
            "params": {"public_pool": 500, "queries": 500},
            "dataset": {"name": "mnist", "silos": 200},
            "model": {"name": "logreg"},
            "rounds": 5,
            "privacy": {"noise_multiplier": 25.0, "delta": 1e-3},
        }
    )
    algorithm = prepare(spec, data_dirs=[data_dir()])
    plan = algorithm.plan(25.0)
    assert len(plan.entries) == 500 and plan.parties == ["agents"]
    classic = plan.epsilon(delta=1e-3, accountant="rdp", conversion="classic")
    assert classic == pytest.approx(3.72, abs=0.01)  # paper: 3.6; Lemma 10 gives 3.72 (note §3.5)
    assert plan.epsilon(delta=1e-3, accountant="rdp") == pytest.approx(3.09, abs=0.01)  # tighter conversion
    # The paper's closed form, solved for σ, inverts it.
    assert float(algorithm.paper_noise_multiplier(epsilon=classic, delta=1e-3)) == pytest.approx(
        25.0, rel=2e-3
    )
    assert len(algorithm.data.y_test) == 9_500 and len(algorithm.pool_y) == 500


def test_knn_run_records_one_vote_per_query_and_data_dependent_never_exceeds_independent():
    spec = parse_spec(
        _digits(
            "knn_dpfl",
            {"public_pool": 160, "queries": 160, "k": 5, "pca_components": 16, "level": "agent"},
            {"noise_multiplier": 1.0, "delta": 1e-3},
        )
    )
    result = run(spec)
    votes = [e for e in result.ledger.entries if isinstance(e.event, VoteEvent)]
    assert len(votes) == 160 and {e.party for e in votes} == {"agents"}
    assert [sum(1 for e in votes if e.round == r) for r in (1, 2, 3, 4)] == [40, 40, 40, 40]
    assert all(e.event.sensitivity == 1.0 and e.event.noise_std == 1.0 for e in votes)
    assert all(sum(e.event.counts) == pytest.approx(10.0) for e in votes)  # 10 agents, simplex votes
    for record in result.rounds:  # the data-dependent ε reads the noiseless votes: a diagnostic
        assert record.diagnostics["epsilon_data_dependent"] <= record.metrics["epsilon_data_independent"]
    final = result.final.metrics | result.final.diagnostics
    # Large margins (gap ≈ 7 of 10 votes, σ = 1): the data-dependent bound is the smaller one.
    assert final["data_dependent_tighter"] == 1.0
    assert final["epsilon_data_dependent"] < 0.5 * final["epsilon_data_independent"]
    # The headline ε is the data-independent one; the data-dependent bound is only beside it.
    assert result.epsilon == pytest.approx(final["epsilon_data_independent"])
    assert result.ledger.epsilon(delta=1e-3, accountant="pate") == pytest.approx(
        final["epsilon_data_dependent"]
    )
    rows = query_table(result.ledger, delta=1e-3)
    assert len(rows) == 160 and rows[0]["query"] == 0 and rows[-1]["query"] == 159
    assert rows[-1]["epsilon_dependent"] == pytest.approx(final["epsilon_data_dependent"])
    assert rows[-1]["epsilon_independent"] == pytest.approx(final["epsilon_data_independent"])
    assert all(r["rdp_dependent"] <= r["rdp_independent"] + 1e-12 for r in rows)
    assert all(a["epsilon_dependent"] <= a["epsilon_independent"] + 1e-12 for a in rows)
    assert final["label_accuracy"] > 0.85 and result.final.accuracy > 0.8


def test_instance_level_knn_records_sqrt2_over_k_and_its_notion():
    spec = parse_spec(
        _digits(
            "knn_dpfl",
            {"public_pool": 100, "queries": 40, "k": 8, "features": "raw"},
            {"epsilon": 2.0, "delta": 1e-4},
            rounds=2,
        )
    )
    result = run(spec)
    events = [e.event for e in result.ledger.entries]
    assert [e.sensitivity for e in events] == [pytest.approx(math.sqrt(2) / 8)] * 40
    assert result.privacy.notion == "instance" and result.ledger.parties == ["instances"]
    assert result.epsilon == pytest.approx(2.0, rel=1e-3)


# --- AE-DPFL and the vote cache --------------------------------------------------------------------


def test_ae_votes_are_cached_across_sigma_and_only_the_noise_changes():
    clear_vote_cache()
    params = {"public_pool": 120, "queries": 120, "local_epochs": 20, "student_epochs": 10}
    first = run(parse_spec(_digits("ae_dpfl", params, {"noise_multiplier": 1.0, "delta": 1e-3})))
    second = run(parse_spec(_digits("ae_dpfl", params, {"noise_multiplier": 3.0, "delta": 1e-3})))
    other_seed = run(parse_spec(_digits("ae_dpfl", params, {"noise_multiplier": 1.0, "delta": 1e-3}, seed=1)))
    assert [r.metrics["votes_cached"] for r in first.rounds] == [0.0, 0.0]
    assert [r.metrics["votes_cached"] for r in second.rounds] == [1.0, 1.0]
    assert other_seed.final.metrics["votes_cached"] == 0.0
    histograms = [[e.event.counts for e in res.ledger.entries] for res in (first, second)]
    assert histograms[0] == histograms[1]
    assert all(sum(c) == 10 for c in histograms[0])  # one one-hot vote per agent
    assert first.final.diagnostics["noiseless_label_accuracy"] > 0.85
    assert first.final.metrics["label_accuracy"] > second.final.metrics["label_accuracy"]
    assert first.epsilon > second.epsilon
    # A shorter run reuses the prefix of a cached histogram.
    shorter = run(
        parse_spec(_digits("ae_dpfl", params | {"queries": 60}, {"noise_multiplier": 1.0, "delta": 1e-3}))
    )
    assert shorter.final.metrics["votes_cached"] == 1.0
    assert [e.event.counts for e in shorter.ledger.entries] == histograms[0][:60]


def test_ae_votes_cover_the_whole_pool_so_a_longer_run_is_served_from_the_cache():
    clear_vote_cache()
    params = {"public_pool": 120, "queries": 40, "local_epochs": 5, "student_epochs": 2}
    privacy = {"noise_multiplier": 1.0, "delta": 1e-3}
    short = run(parse_spec(_digits("ae_dpfl", params, privacy)))
    longer = run(parse_spec(_digits("ae_dpfl", params | {"queries": 120}, privacy)))
    assert short.final.metrics["votes_cached"] == 0.0
    assert longer.final.metrics["votes_cached"] == 1.0
    counts = [[e.event.counts for e in res.ledger.entries] for res in (short, longer)]
    assert (len(counts[0]), len(counts[1])) == (40, 120)
    assert counts[1][:40] == counts[0]


def test_student_accuracy_floor_on_mnist_with_knn_votes():
    spec = parse_spec(
        {
            "algorithm": "knn_dpfl",
            "params": {"public_pool": 3000, "queries": 600, "k": 20, "pca_components": 40},
            "dataset": {"name": "mnist", "silos": 20, "partition": {"kind": "iid"}},
            "model": {"name": "mlp", "hidden": [64]},
            "rounds": 3,
            "eval_every": 3,
            "privacy": {"epsilon": 4.0, "delta": 1e-4},
        }
    )
    result = run(spec, data_dirs=[data_dir()])
    assert len(result.rounds) == 1 and result.epsilon == pytest.approx(4.0, rel=1e-3)
    assert result.final.metrics["label_accuracy"] > 0.9
    assert result.final.accuracy > 0.85  # measured 0.874 on the 7,000 MNIST test digits left


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("algorithm", "params", "overrides", "message"),
    [
        (
            "ae_dpfl",
            {"public_pool": 100, "queries": 101},
            {},
            "`params.queries` must be ≤ `public_pool` (100): each query is a record of the public pool; "
            "got 101.",
        ),
        (
            "ae_dpfl",
            {"public_pool": 359, "queries": 100},
            {},
            "`params.public_pool` must be between 0 and 358 (the dataset has 359 test records and at least "
            "one must stay for testing); got 359.",
        ),
        (
            "ae_dpfl",
            {"public_pool": 100, "queries": 3},
            {},
            "`rounds` must be ≤ params.queries (3) for ae_dpfl: each round answers a batch of queries; "
            "got 4.",
        ),
        (
            "knn_dpfl",
            {"public_pool": 100, "queries": 50, "k": 500},
            {},
            "`params.k` must be ≤ 143, the records of the smallest agent; got 500.",
        ),
        (
            "knn_dpfl",
            {"public_pool": 100, "queries": 50},
            {"dataset": {"name": "digits", "silos": 10, "features": {"pca": 10}}},
            "`dataset.features` must be empty for knn_dpfl: feature transforms are fitted on the agents' "
            "private training records, which the vote's privacy analysis does not cover.",
        ),
        (
            "ae_dpfl",
            {"public_pool": 100, "queries": 50},
            {"participation": 5},
            "`participation` is not used by ae_dpfl: every agent votes on every query.",
        ),
    ],
)
def test_bad_voting_specs_name_the_field(algorithm, params, overrides, message):
    with pytest.raises(SpecError) as info:
        prepare(parse_spec(_digits(algorithm, params, {"noise_multiplier": 1.0, "delta": 1e-3}, **overrides)))
    assert str(info.value) == message


# --- frozen features fitted on the public pool ------------------------------------------------------


def test_frozen_features_are_the_pools_principal_components_and_cost_no_privacy():
    params = {"public_pool": 120, "queries": 40, "local_epochs": 5, "student_epochs": 5, "pool_pca": 12}
    spec = parse_spec(_digits("ae_dpfl", params, {"noise_multiplier": 1.0, "delta": 1e-3}))
    algorithm = prepare(spec, data_dirs=[data_dir()])
    raw = prepare(parse_spec(_digits("ae_dpfl", params | {"pool_pca": 0}, spec.privacy.model_dump())),
                  data_dirs=[data_dir()])  # fmt: skip
    assert algorithm.data.input_shape == (12,) and algorithm.layout.size == (12 + 1) * 32 + (32 + 1) * 10
    mean, components, _ = pca_components(raw.pool_x.numpy(), 12)
    expected = (raw.data.x_train.numpy() - mean) @ components.T
    np.testing.assert_allclose(algorithm.data.x_train.numpy(), expected, atol=1e-4)
    pool = (raw.pool_x.numpy() - mean) @ components.T
    np.testing.assert_allclose(algorithm.pool_x.numpy(), pool, atol=1e-4)
    assert algorithm.data.fitted == ()  # public data only: nothing for the ledger to miss
    result = run(spec, data_dirs=[data_dir()])
    assert result.privacy.guaranteed and result.final.metrics["label_accuracy"] > 0.6


def test_dp_fedavg_trains_on_the_same_frozen_features():
    params = {"public_pool": 120, "pool_pca": 12, "sample_rate": 1.0, "local_steps": 10, "lr": 0.1}
    privacy = {"noise_multiplier": 0.3, "delta": 1e-3}
    result = run(parse_spec(_digits("dp_fedavg", params, privacy, rounds=10)), data_dirs=[data_dir()])
    assert result.final_params.numel() == (12 + 1) * 32 + (32 + 1) * 10
    assert result.privacy.guaranteed and result.final.accuracy > 0.5


@pytest.mark.parametrize(
    ("algorithm", "params", "model", "message"),
    [
        ("dp_fedavg", {"pool_pca": 12}, {"name": "mlp", "hidden": [32]},
         "needs a public pool to be fitted on: set params.public_pool above 0."),
        ("ae_dpfl", {"public_pool": 120, "queries": 40, "pool_pca": 65}, {"name": "mlp", "hidden": [32]},
         "must be between 1 and 64 (the public pool's records and the inputs' features); got 65."),
    ],
)  # fmt: skip
def test_frozen_features_refuse_what_they_cannot_fit(algorithm, params, model, message):
    spec = parse_spec(_digits(algorithm, params, {"noise_multiplier": 1.0, "delta": 1e-3}, model=model))
    with pytest.raises(SpecError) as caught:
        prepare(spec, data_dirs=[data_dir()])
    assert (caught.value.field, caught.value.reason) == ("params.pool_pca", message)


def test_frozen_features_refuse_a_model_that_convolves_images():
    params = {"public_pool": 120, "queries": 40, "pool_pca": 12}
    spec = parse_spec(
        _digits("ae_dpfl", params, {"noise_multiplier": 1.0}, model={"name": "cnn"})
        | {"dataset": {"name": "mnist", "silos": 10, "partition": {"kind": "iid"}}}
    )
    with pytest.raises(SpecError) as caught:
        prepare(spec, data_dirs=[data_dir()])
    assert (caught.value.field, caught.value.reason) == (
        "params.pool_pca",
        "needs a model of flat inputs: 'cnn' convolves images; use mlp or logreg.",
    )

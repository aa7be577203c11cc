"""The ULDP-FL family: weights, user-level sensitivity, accounting, group capping, accuracy."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch
from torch.func import functional_call, grad

import dpfl.engine.blocks as engine_blocks
from dpfl.algorithms.uldp.groups import RecordGroups, _gather, _steps, epoch_order, local_sgd
from dpfl.engine import ParamLayout
from dpfl.engine.noise import SAMPLING_STREAM, silo_generator
from dpfl.errors import SpecError
from dpfl.privacy.events import GroupEvent, ParallelEvent
from dpfl.runner import prepare, project, run
from dpfl.spec import parse_spec
from tests.factories import data_dir

HEART_PARAMS = {"global_lr": 10, "clip": 0.1, "local_lr": 0.001, "local_epochs": 50, "batch_size": 4}


def heart_spec(algorithm: str = "uldp_avg_w", **overrides) -> dict:
    """The paper's HeartDisease setting: 4 natural silos, 50 zipf users, σ = 5, δ = 1e-5."""
    return {
        "algorithm": algorithm,
        "params": HEART_PARAMS,
        "dataset": {
            "name": "heart",
            "silos": 4,
            "partition": {"kind": "natural"},
            "users": {"kind": "zipf", "count": 50},
        },
        "model": {"name": "logreg"},
        "rounds": 50,
        "eval_every": 25,
        "privacy": {"noise_multiplier": 5.0, "delta": 1e-5},
    } | overrides


def prepared(spec: dict):
    algorithm = prepare(parse_spec(spec), data_dirs=[data_dir()])
    algorithm.setup(project(algorithm).noise_multiplier)
    return algorithm


@pytest.mark.parametrize("weighting", ["uniform", "records"])
def test_weights_sum_to_at_most_one_per_user(weighting):
    alg = prepared(heart_spec("uldp_avg", params=HEART_PARAMS | {"weighting": weighting}))
    counts = alg.users.counts()
    totals = alg.weights.sum(axis=0)
    assert totals.max() <= 1 + 1e-12
    if weighting == "records":
        present = counts.sum(axis=0) > 0
        np.testing.assert_allclose(totals[present], 1.0)
        np.testing.assert_allclose(alg.weights, counts / np.maximum(counts.sum(axis=0), 1))
    else:
        np.testing.assert_allclose(alg.weights, 0.25)


@pytest.mark.parametrize("algorithm", ["uldp_avg", "uldp_avg_w", "uldp_sgd"])
def test_one_user_moves_the_sum_over_silos_by_at_most_c(algorithm):
    params = {"global_lr": 10, "clip": 0.1} if algorithm == "uldp_sgd" else HEART_PARAMS
    alg = prepared(heart_spec(algorithm, params=params))
    silos = np.arange(4)
    sums, clipped, groups, _ = silo_sums(alg, silos, None, keep=True)
    weights = torch.as_tensor(alg.weights[groups.silo, groups.user], dtype=clipped.dtype)
    per_user = torch.zeros(alg.users.num_users, clipped.shape[1], dtype=clipped.dtype)
    per_user.index_add_(0, torch.as_tensor(groups.user), clipped * weights[:, None])
    norms = torch.linalg.vector_norm(per_user, dim=1)
    # every user, whatever its records (1 to ~90) and silos (1 to 4), moves the sum by ≤ C
    records = alg.users.records_per_user()
    assert records.max() >= 20 and (alg.users.counts() > 0).sum(axis=0).max() == 4
    assert float(norms.max()) <= 0.1 * (1 + 1e-5)
    assert float(norms.max()) > 0.05  # the bound is nearly reached: clipping is active
    # Removing the user with the most records changes the released sum by exactly its share.
    u = int(np.argmax(records))
    keep = np.ones(alg.users.num_users, dtype=bool)
    keep[u] = False
    without, *_ = silo_sums(alg, silos, keep)
    moved = (sums - without).sum(0)
    torch.testing.assert_close(moved, per_user[u], atol=1e-7, rtol=1e-5)
    assert float(torch.linalg.vector_norm(moved)) <= 0.1 * (1 + 1e-5)


def silo_sums(alg, silos, sampled, *, keep=False):
    """Returns one run's weighted silo sums at round 1, its clipped contributions, groups and
    fraction clipped."""
    groups = alg.groups(silos, sampled)
    (sums,), clipped, (frac,) = type(alg).silo_sums([alg], 1, [silos], groups, keep=keep)
    return sums, clipped, groups, frac


def _dp_accounting_epsilon(sigma: float, rounds: int, q: float = 1.0) -> float:
    acc = dp_accounting.rdp.RdpAccountant()
    event = dp_accounting.GaussianDpEvent(sigma)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    acc.compose(dp_accounting.SelfComposedDpEvent(event, rounds))
    return acc.get_epsilon(1e-5)


@pytest.mark.parametrize(
    ("algorithm", "q", "rounds", "reference"),
    [
        ("uldp_avg_w", 1.0, 100, 10.726),  # reference §3.4: σ = 5, T = 100
        ("uldp_sgd", 1.0, 50, 7.077),
        ("uldp_naive", 1.0, 200, 16.513),
        ("uldp_avg", 0.1, 100, 0.835),
    ],
)
def test_user_level_epsilon_equals_dp_accounting_and_the_papers_values(algorithm, q, rounds, reference):
    params = {"global_lr": 10, "clip": 0.1} if algorithm == "uldp_sgd" else HEART_PARAMS
    if algorithm == "uldp_naive":
        params = {k: v for k, v in HEART_PARAMS.items()}
    elif q < 1:
        params = params | {"user_sampling_rate": q}
    alg = prepare(parse_spec(heart_spec(algorithm, params=params, rounds=rounds)), data_dirs=[data_dir()])
    privacy = project(alg)
    ours = privacy.planned_epsilon[-1]
    assert ours == pytest.approx(_dp_accounting_epsilon(5.0, rounds, q), rel=1e-6)
    assert ours == pytest.approx(reference, abs=0.01)


def test_calibration_reaches_the_target_epsilon():
    spec = heart_spec("uldp_avg_w", rounds=20, privacy={"epsilon": 3.0, "delta": 1e-5})
    privacy = project(prepare(parse_spec(spec), data_dirs=[data_dir()]))
    assert privacy.planned_epsilon[-1] == pytest.approx(3.0, rel=1e-3)
    assert _dp_accounting_epsilon(privacy.noise_multiplier * (1 - 1e-3), 20) > 3.0


def test_group_caps_users_at_k_and_reports_a_sound_conversion_for_any_k():
    spec = heart_spec(
        "uldp_group",
        params=HEART_PARAMS | {"global_lr": 1, "local_epochs": 2, "group_size": 3},
        rounds=2,
        privacy={"noise_multiplier": 5.0, "delta": 1e-5, "accountant": "group"},
    )
    alg = prepare(parse_spec(spec), data_dirs=[data_dir()])
    owners = alg.data.users
    kept_users = np.concatenate([ids[m] for ids, m in zip(owners.user_ids, owners.capped(3), strict=True)])
    per_user = np.bincount(kept_users, minlength=owners.num_users)
    assert per_user.max() == 3
    np.testing.assert_array_equal(per_user, np.minimum(owners.records_per_user(), 3))
    assert alg.dropped == int(owners.records_per_user().sum() - per_user.sum())
    # one round: k = 3 over the pointwise maximum of the silos' DP-SGD curves
    (entry,) = [e for e in alg.plan(5.0).entries if e.round == 1]
    assert isinstance(entry.event, GroupEvent) and entry.event.group_size == 3
    assert isinstance(entry.event.event, ParallelEvent) and len(entry.event.event.events) == 4
    result = run(parse_spec(spec), data_dirs=[data_dir()])
    out = result.to_json()["privacy"]
    record_level = result.ledger.epsilon(delta=1e-5, accountant="rdp")  # k = 3 → 4 on the RDP route
    assert 0 < out["epsilon"] <= record_level
    assert out["conversion"].startswith("group privacy for k = 3: the ")
    assert "(ε, δ) route ε = " in out["conversion"]


def test_group_dp_sgd_draws_each_silo_alone_at_its_poisson_rate():
    params = HEART_PARAMS | {"global_lr": 1, "local_epochs": 3}
    alg = prepared(heart_spec("uldp_group", params=params))
    together = alg.silo_deltas(np.arange(4), 1)
    torch.testing.assert_close(alg.silo_deltas(np.array([2]), 1)[0], together[2], rtol=0, atol=0)
    # the samples: each kept record of a silo in a step with probability q_s = B/n_s, no other
    gens = [silo_generator(0, s, 7, SAMPLING_STREAM) for s in range(4)]
    rows, mask = alg._poisson_rows(np.arange(4), gens, [2000] * 4, 2000)
    for s in range(4):
        taken = rows[:, s][mask[:, s]]
        assert set(taken.tolist()) <= set(alg.kept[s].tolist())
        n, q = len(alg.kept[s]), alg.rates[s]
        mean, sd = 2000 * n * q, math.sqrt(2000 * n * q * (1 - q))
        assert abs(len(taken) - mean) < 5 * sd, (s, len(taken), mean)


def test_users_are_required_and_spec_rules_name_the_field():
    spec = heart_spec()
    del spec["dataset"]["users"]
    with pytest.raises(SpecError, match=r"^`dataset\.users` is required for uldp_avg_w"):
        prepared(spec)
    with pytest.raises(SpecError, match=r"^`dataset\.users\.count` is required for allocated users"):
        parse_spec(heart_spec(dataset={"name": "heart", "users": {"kind": "zipf"}}))
    with pytest.raises(SpecError, match=r"^`dataset\.partition` must be left at its default"):
        users = {"kind": "zipf", "count": 5, "silo_alpha": 2}
        parse_spec(heart_spec(dataset={"name": "heart", "partition": {"kind": "natural"}, "users": users}))


@pytest.mark.parametrize("bad", [0, "half", True])
def test_group_size_must_be_positive_or_named(bad):
    message = r"^`params\.group_size` must be an integer ≥ 1 or one of max, median; got "
    with pytest.raises(SpecError, match=message):
        prepared(heart_spec("uldp_group", params=HEART_PARAMS | {"group_size": bad}))


def test_users_first_deals_each_users_records_by_zipf_over_silos():
    spec = {
        "algorithm": "fedavg_2lr",
        "dataset": {"name": "mnist", "silos": 5, "users": {"kind": "zipf", "count": 100, "silo_alpha": 2.0}},
        "model": {"name": "logreg"},
        "rounds": 1,
    }
    alg = prepare(parse_spec(spec), data_dirs=[data_dir()])
    counts = alg.data.users.counts()  # [silos, users]
    assert counts.sum() == 60_000 and alg.data.silo_sizes.sum() == 60_000
    top_share = counts.max(axis=0).sum() / counts.sum()
    assert top_share == pytest.approx(1 / sum(j**-2.0 for j in range(1, 6)), abs=0.01)  # 0.683
    per_user = counts.sum(axis=0)
    assert per_user[0] > 5 * per_user[-1] ** 0  # rank 1 holds the most records under Zipf
    assert per_user[:10].mean() > 2 * per_user[-10:].mean()  # (10/1)^0.5 ≈ 3.2 for ranks 1 vs 100


def _hidden_layer_models(features: int) -> dict[str, torch.nn.Module]:
    """Two models of the same shape: a stack of linear layers (stepped layer by layer in place)
    and one with a LayerNorm, which is not (stepped by `mean_grad`)."""
    torch.manual_seed(0)
    linear = torch.nn.Sequential(torch.nn.Linear(features, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    torch.manual_seed(0)
    normed = torch.nn.Sequential(
        torch.nn.Linear(features, 8), torch.nn.LayerNorm(8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
    )
    return {"mlp": linear, "layernorm": normed}


@pytest.mark.parametrize("model", ["logreg", "mlp", "layernorm"])
def test_vectorised_local_training_equals_a_per_group_loop(model):
    alg = prepared(heart_spec("uldp_avg", params=HEART_PARAMS | {"local_epochs": 2}))
    if model != "logreg":
        alg.model = _hidden_layer_models(alg.data.x_train.shape[1])[model]
        alg.layout = ParamLayout.of(alg.model)
        alg.w = alg.layout.flatten_module(alg.model)
    groups = RecordGroups.of_users(alg.data, alg.users, np.arange(4))
    block = slice(4, 20)  # groups of 14 down to 7 records: partial last batches, groups dropping out
    fast = local_sgd(
        alg.model, alg.layout, alg.w, alg.data, groups, block,
        epochs=2, batch_size=4, lr=0.05, seed=0, round=1,
    )  # fmt: skip
    # a batch of runs: each group from its own start, the same steps
    starts = alg.w + 0.01 * torch.randn(16, alg.layout.size, generator=torch.Generator().manual_seed(1))
    from_own = local_sgd(
        alg.model, alg.layout, starts, alg.data, groups, block,
        epochs=2, batch_size=4, lr=0.05, seed=0, round=1,
    )  # fmt: skip
    # The loop: each group alone, the same epoch orders, plain autograd of its mean loss.
    index, count = groups.index[block], groups.count[block]
    orders = [epoch_order(groups, block, seed=0, round=1, epoch=e) for e in range(2)]
    for out, start_of in ((fast, lambda g: alg.w), (from_own, lambda g: starts[g])):
        for g in range(16):
            params = alg.layout.unflatten(start_of(g).clone())
            for order in orders:
                rows = index[g, order[g, : count[g]]]
                for start in range(0, int(count[g]), 4):
                    batch = rows[start : start + 4]

                    def loss(p, batch=batch):
                        logits = functional_call(alg.model, p, (alg.data.x_train[batch],))
                        return torch.nn.functional.cross_entropy(logits, alg.data.y_train[batch])

                    step = grad(loss)(params)
                    params = {k: v - 0.05 * step[k] for k, v in params.items()}
            torch.testing.assert_close(out[g], alg.layout.flatten(params), atol=1e-6, rtol=1e-5)
    assert not torch.equal(fast, alg.w.expand_as(fast))  # it trained


@pytest.mark.parametrize(
    ("algorithm", "params", "floor"),
    [
        ("fedavg_2lr", {"global_lr": 1, "local_lr": 0.005, "local_epochs": 5, "batch_size": 4}, 0.70),
        ("uldp_avg_w", HEART_PARAMS | {"local_epochs": 10, "local_lr": 0.005}, 0.70),
        ("uldp_avg", HEART_PARAMS | {"local_epochs": 10, "local_lr": 0.005}, 0.68),
        ("uldp_sgd", {"global_lr": 30, "clip": 0.1}, 0.68),
    ],
)
def test_heart_disease_accuracy_floor(algorithm, params, floor):
    # majority class of the test set: 0.55; the DP runs spend ε = 4.16 (σ = 5, 20 rounds)
    spec = heart_spec(algorithm, params=params, rounds=20, eval_every=20)
    if algorithm == "fedavg_2lr":
        spec |= {"rounds": 10, "eval_every": 10}
        del spec["privacy"]
    result = run(parse_spec(spec), data_dirs=[data_dir()])
    assert result.final.accuracy >= floor


def test_mnist_accuracy_floor():
    # The paper's MNIST allocation (100 zipf users dealt to 5 silos by Zipf(2)), reduced for
    # time: PCA-50 features, a linear model, one local epoch, 5 rounds (ε = 1.91 at σ = 5).
    spec = {
        "algorithm": "uldp_avg_w",
        "params": {"global_lr": 30, "clip": 0.1, "local_lr": 0.1, "local_epochs": 1, "batch_size": 64},
        "dataset": {
            "name": "mnist",
            "silos": 5,
            "features": {"pca": 50},
            "users": {"kind": "zipf", "count": 100, "silo_alpha": 2.0},
        },
        "model": {"name": "logreg"},
        "rounds": 5,
        "eval_every": 5,
        "privacy": {"noise_multiplier": 5.0, "delta": 1e-5},
    }
    result = run(parse_spec(spec), data_dirs=[data_dir()])
    assert result.final.epsilon == pytest.approx(1.914, abs=1e-3)
    assert result.final.accuracy >= 0.72


def test_a_csv_with_user_and_silo_columns_keeps_its_own_allocation(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["x1,x2,label,hospital,patient"]
    owners = []
    for _ in range(400):
        patient, hospital = int(rng.integers(30)), int(rng.integers(3))
        x = rng.normal(size=2)
        rows.append(f"{x[0]:.4f},{x[1]:.4f},{int(x.sum() > 0)},h{hospital},p{patient:02d}")
        owners.append((hospital, patient))
    (tmp_path / "visits.csv").write_text("\n".join(rows) + "\n")
    spec = {
        "algorithm": "uldp_avg",
        "params": {"global_lr": 10, "clip": 0.5, "local_lr": 0.1, "local_epochs": 2, "batch_size": 8},
        "dataset": {
            "name": "csv",
            "silos": 3,
            "options": {"path": "visits.csv", "label": "label", "silo": "hospital", "user_id": "patient"},
            "partition": {"kind": "natural"},
            "users": {"kind": "natural"},
        },
        "model": {"name": "logreg"},
        "rounds": 3,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    result = run(parse_spec(spec), data_dirs=[tmp_path])
    users = result.to_json()["diagnostics"]["users"]
    assert users["kind"] == "natural" and users["num_users"] == 30
    assert sum(users["records_per_user"]) == 320  # the training split: 80 % of the rows
    assert users["silos_per_user"][0] == 0 and sum(users["silos_per_user"]) == 30
    assert max(len({h for h, p in owners if p == u}) for u in range(30)) == 3
    assert users["silos_per_user"][3] > 0  # patients seen in all three hospitals


def test_secure_weighting_gives_the_plain_model_and_reports_its_cost():
    params = HEART_PARAMS | {"local_epochs": 2, "key_bits": 1024, "n_max": 200}
    plain = run(parse_spec(heart_spec(params=params, rounds=3, eval_every=3)), data_dirs=[data_dir()])
    spec = heart_spec(params=params | {"secure_weighting": True}, rounds=3, eval_every=3)
    secure = run(parse_spec(spec), data_dirs=[data_dir()])
    # Per round the protocol's sum is exact to (U + S)/(2P) = 54/(2·1e10); the server scales it
    # by η_g/(|U||S|) = 0.05, far below float32 resolution: the models agree to float32 rounding.
    assert secure.final.loss == pytest.approx(plain.final.loss, abs=1e-6)
    assert secure.final.accuracy == plain.final.accuracy
    cost = secure.final.diagnostics  # the protocol's cost is a diagnostic
    assert cost["secure_setup_s"] > 0 and cost["secure_silo_s"] > 0 and cost["secure_aggregate_s"] > 0
    assert cost["secure_bytes_per_silo"] == 28 * 2 * 1024 / 8  # d = 2 × (13 + 1) ciphertexts of 2κ bits
    assert secure.epsilon == plain.epsilon


def test_uldp_sgd_gradient_in_chunks_equals_the_whole_mean(monkeypatch):
    import dpfl.algorithms.uldp.weighted as weighted

    alg = prepared(heart_spec("uldp_sgd", params={"global_lr": 10, "clip": 0.1}))
    groups = alg.groups(np.arange(4), None)
    every, start = slice(0, len(groups)), alg.w.expand(len(groups), -1)
    whole = alg.contributions(groups, every, 1, start, [0])  # every group fits one chunk
    monkeypatch.setattr(weighted, "_GRADIENT_CHUNK", 3)  # groups of up to 27 records: 1 to 9 chunks
    torch.testing.assert_close(alg.contributions(groups, every, 1, start, [0]), whole, atol=1e-6, rtol=1e-5)


def test_blocks_cover_every_group_once_and_fit_the_cache():
    alg = prepared(heart_spec("uldp_avg"))
    groups = alg.groups(np.arange(4), None)
    features = alg.data.x_train[0].numel()
    # logistic regression on 13 features: every pair in one block
    assert list(groups.blocks(alg.data, params=alg.layout.size, batch_size=4)) == [slice(0, len(groups))]
    # a 50,890-parameter model: blocks as large as the cache allows, largest groups first
    blocks = list(groups.blocks(alg.data, params=50_890, batch_size=64))
    assert [b.start for b in blocks] == [0] + [b.stop for b in blocks[:-1]] and blocks[-1].stop == len(groups)
    for b in blocks[:-1]:
        per_group = 4 * (3 * 50_890 + min(64, int(groups.count[b.start])) * features)
        size = b.stop - b.start
        assert size * per_group <= engine_blocks.CACHE_BYTES < (size + 1) * per_group
    assert [b.stop - b.start for b in blocks[:2]] == [27, 27]


@pytest.mark.parametrize("algorithm", ["uldp_avg", "uldp_sgd"])
def test_silo_sums_do_not_depend_on_the_blocks(monkeypatch, algorithm):
    params = HEART_PARAMS | {"local_epochs": 2} if algorithm == "uldp_avg" else {"clip": 0.1}
    alg = prepared(heart_spec(algorithm, params=params))
    one_block, _, groups, frac = silo_sums(alg, np.arange(4), None)
    monkeypatch.setattr(engine_blocks, "CACHE_BYTES", 1)  # blocks of one group
    assert len(list(groups.blocks(alg.data, params=alg.layout.size, batch_size=4))) == len(groups) == 127
    per_group, _, _, frac_per_group = silo_sums(alg, np.arange(4), None)
    torch.testing.assert_close(per_group, one_block, atol=1e-7, rtol=1e-6)
    assert frac_per_group == pytest.approx(frac)


def test_group_size_defaults_to_a_fixed_8_and_a_size_read_from_the_data_is_not_guaranteed():
    params = {k: v for k, v in HEART_PARAMS.items() if k != "global_lr"} | {"local_epochs": 1}
    spec = heart_spec("uldp_group", params=params, rounds=1, eval_every=1)
    fixed = prepare(parse_spec(spec), data_dirs=[data_dir()])
    assert fixed.params.group_size == fixed.k == 8 and fixed.privacy_caveat() is None
    assert "data_dependent" not in [c.kind for c in project(fixed).caveats]
    median = heart_spec("uldp_group", params=params | {"group_size": "median"}, rounds=1, eval_every=1)
    result = run(parse_spec(median), data_dirs=[data_dir()])
    out = result.to_json()["privacy"]
    per_user = result.to_json()["diagnostics"]["users"]["records_per_user"]
    k = int(np.median([n for n in per_user if n > 0]))
    assert k == result.final.metrics["group_size"] == 8  # zipf-50 on heart: median 8 records
    assert out["guaranteed"] is False
    assert f"the group size k = {k} is the median of the users' record counts" in out["warning"]
    assert [c["kind"] for c in out["caveats"]] == ["simulation", "preprocessing", "data_dependent"]


@pytest.mark.parametrize("algorithm", ["uldp_avg", "uldp_avg_w", "uldp_sgd"])
def test_noise_from_os_entropy_trains_the_user_level_methods(algorithm):
    """An entropy run's seed has 128 bits; the users' epoch orders fold it to 64."""
    privacy = {"noise_multiplier": 5.0, "delta": 1e-5, "noise_source": "entropy"}
    params = {"global_lr": 10, "clip": 0.1} if algorithm == "uldp_sgd" else HEART_PARAMS
    result = run(
        parse_spec(heart_spec(algorithm, params=params, rounds=2, eval_every=2, privacy=privacy)),
        data_dirs=[data_dir()],
    )
    assert result.privacy.noise_source == "entropy" and result.final.accuracy > 0.3


def test_records_gathered_into_scratch_are_the_records_with_padding_zeroed():
    alg = prepared(heart_spec("uldp_avg"))
    groups = alg.groups(np.arange(4), None)
    width = int(groups.count.max())
    real = torch.arange(width)[None, :] < groups.count[:, None]
    assert not bool(real.all())  # some groups are padded
    rows, mask = groups.index.reshape(-1), real.reshape(-1)
    fresh = _gather(alg.data, rows, mask)
    scratch = _gather(alg.data, rows, mask, scratch=True)
    for x, y in (fresh, scratch):
        assert torch.equal(x[mask], alg.data.x_train[rows[mask]])
        assert torch.equal(y[mask], alg.data.y_train[rows[mask]])
        assert not x[~mask].any() and not y[~mask].any()
    # the scratch is this thread's buffer, reused by the next such call (fresh tensors are not)
    again = _gather(alg.data, rows[:30], mask[:30], scratch=True)
    assert again[0].data_ptr() == scratch[0].data_ptr() != fresh[0].data_ptr()


def test_local_steps_take_each_groups_records_in_its_epoch_order_minibatch_by_minibatch():
    """Each step's minibatch is the next B of every still-training group's records in the
    epoch's order; groups that have run out take no part (they are not gathered)."""
    alg = prepared(heart_spec("uldp_avg"))
    groups = alg.groups(np.arange(4), None)
    block, batch_size = slice(0, len(groups)), 4
    count = groups.count
    per_epoch = -(-int(count.max()) // batch_size)
    # a step is a view of the thread's scratch, valid until the next epoch's gather: check as they come
    steps = _steps(alg.data, groups, block, 2, batch_size, 7, 3)
    for epoch in range(2):
        order = groups.index.gather(1, epoch_order(groups, block, seed=7, round=3, epoch=epoch))
        for t in range(per_epoch):
            active, batch = next(steps)
            cols = slice(t * batch_size, (t + 1) * batch_size)
            assert active == int((count > t * batch_size).sum()) and batch.mask.shape[0] == active
            real = torch.arange(order.shape[1])[None, cols] < count[:active, None]
            assert torch.equal(batch.mask, real)
            assert torch.equal(batch.x[real], alg.data.x_train[order[:active, cols][real]])
            assert torch.equal(batch.y[real], alg.data.y_train[order[:active, cols][real]])
            assert not batch.x[~real].any()
    assert next(steps, None) is None

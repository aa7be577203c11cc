"""Voting with `fraudnet` (dropout 0.5) on card_data Creditcard files.

AE-DPFL used to fail with fraudnet: `predicted_labels` ran the agents' models through ``vmap``
in training mode, whose dropout is a random draw ``vmap`` refuses ("randomness error mode"),
and DANN's ``vmap`` (AE-DPFL+DA) likewise. Voting's privacy is the noisy argmax over one-hot
votes (sensitivity 1 per agent, √2 per record): how an agent trains its local model is inside
that bound, so its local training may use dropout, its masks keyed by the run's noise key like
any mechanism's draw, and it predicts in eval mode, as a deployed model does. The ledger is then
the vote mechanism's alone: the same as an MLP's on the same data.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from dpfl import runner
from dpfl.algorithms.voting import clear_vote_cache
from dpfl.algorithms.voting.ae import LOCAL_ROUND
from dpfl.algorithms.voting.votes import predicted_labels
from dpfl.engine import ParamLayout, stack_copies
from dpfl.engine.noise import model_draws
from dpfl.models import build_model, draws_randomness
from dpfl.privacy.events import VoteEvent
from dpfl.spec import parse_spec

SIGMA = 2.0
AGENTS = 4


PARAMS = {
    "ae_dpfl": {"local_epochs": 2, "local_batch_size": 16, "student_epochs": 2},
    "ae_dpfl_da": {"local_epochs": 2, "local_batch_size": 16, "student_epochs": 2, "domain_hidden": 8},
    "knn_dpfl": {"k": 2, "pca_components": 10, "student_epochs": 2},
}


def vote_spec(algorithm: str, model: dict, **overrides) -> dict:
    return {
        "algorithm": algorithm,
        "params": {"level": "agent", "public_pool": 40, "queries": 20} | PARAMS[algorithm],
        "dataset": {"name": "creditcard", "silos": AGENTS},
        "model": model,
        "rounds": 2,
        "privacy": {"noise_multiplier": SIGMA, "delta": 1e-5},
        "seed": 0,
    } | overrides


FRAUDNET = {"name": "fraudnet"}
MLP = {"name": "mlp", "hidden": [30]}


def fraudnet_agents(models: int = 5) -> tuple[nn.Module, ParamLayout, torch.Tensor]:
    model = build_model("fraudnet", input_shape=(30,), num_classes=2, seed=0)
    layout = ParamLayout.of(model)
    base = layout.flatten_module(model)
    gen = torch.Generator().manual_seed(1)
    return model, layout, base + 0.5 * base.abs().mean() * torch.randn(models, layout.size, generator=gen)


def test_votes_are_predicted_in_eval_mode_and_draw_nothing():
    model, layout, params = fraudnet_agents()
    x = torch.randn(200, 30, generator=torch.Generator().manual_seed(2))
    assert draws_randomness(model)
    state = torch.random.get_rng_state()
    labels = predicted_labels(model, layout, params, x)
    assert torch.equal(torch.random.get_rng_state(), state) and model.training  # nothing drawn, mode kept
    assert torch.equal(predicted_labels(model, layout, params, x), labels)
    expected, with_dropout = [], []
    for row in params:
        layout.load_into(model, row)
        with torch.no_grad():
            expected.append(model.eval()(x).argmax(1))
            torch.manual_seed(3)
            with_dropout.append(model.train()(x).argmax(1))
    assert torch.equal(labels, torch.stack(expected))
    # dropout at prediction would move votes: here 382 of the 1,000 labels
    assert int((labels != torch.stack(with_dropout)).sum()) == pytest.approx(382, abs=40)


@pytest.mark.parametrize("algorithm", ["ae_dpfl", "ae_dpfl_da", "knn_dpfl"])
def test_a_fraudnet_vote_has_the_ledger_of_the_same_vote_with_an_mlp(card_data, algorithm):
    """20 queries in 2 rounds, σ = 2: one VoteEvent(σ, 1) per query whatever model votes. The
    public ledgers are equal entry by entry, the ε too, and both are the plan's; the withheld
    histograms (the data-dependent bound's input) are the models' own, 4 votes each for AE."""
    results = {}
    for name, model in (("fraudnet", FRAUDNET), ("mlp", MLP)):
        clear_vote_cache()
        spec = parse_spec(vote_spec(algorithm, model))
        results[name] = runner.run(spec, data_dirs=[card_data], device="cpu")
        plan = runner.prepare(spec, data_dirs=[card_data]).plan(SIGMA)
        assert results[name].ledger.to_json() == plan.to_json()
    fraudnet, mlp = results["fraudnet"], results["mlp"]
    assert fraudnet.ledger.to_json() == mlp.ledger.to_json()
    assert [(e.round, e.party) for e in fraudnet.ledger.entries] == [(1, "agents")] * 10 + [
        (2, "agents")
    ] * 10
    assert {dataclasses.replace(e.event, counts=None) for e in fraudnet.ledger.entries} == {
        VoteEvent(SIGMA, 1.0)
    }
    assert fraudnet.epsilon == mlp.epsilon == pytest.approx(fraudnet.ledger.epsilon(delta=1e-5), rel=1e-12)
    independent = [r.final.metrics["epsilon_data_independent"] for r in (fraudnet, mlp)]
    assert independent[0] == independent[1]
    counts = np.array([e.event.counts for e in fraudnet.ledger.entries])
    np.testing.assert_allclose(counts.sum(1), AGENTS)  # one vote per agent (kNN: on the simplex)
    assert fraudnet.final_params.numel() == 5_012 and bool(torch.isfinite(fraudnet.final_params).all())


def test_fraudnet_votes_depend_on_the_runs_key_alone(card_data):
    """Two runs after different global generator states give the same histograms and student;
    the agents' local models do train with dropout (other keys, other models; without dropout,
    others again), and a key gives one set of models."""
    spec = parse_spec(vote_spec("ae_dpfl", FRAUDNET))
    histograms, students = [], []
    for state in (1, 2):
        clear_vote_cache()
        torch.manual_seed(state)
        result = runner.run(spec, data_dirs=[card_data], device="cpu")
        histograms.append([e.event.counts for e in result.ledger.entries])
        students.append(result.final_params)
    assert histograms[0] == histograms[1] and torch.equal(students[0], students[1])

    alg = runner.prepare(spec, data_dirs=[card_data])
    init = stack_copies(alg.layout.flatten_module(alg.model), AGENTS)

    def local(key: int) -> torch.Tensor:
        with model_draws(key, LOCAL_ROUND):
            return alg.local_models(init)

    assert torch.equal(local(alg.noise_key), local(alg.noise_key))
    assert not torch.equal(local(alg.noise_key), local(alg.noise_key + 1))
    alg.model.eval()
    try:
        without = alg.local_models(init)
    finally:
        alg.model.train()
    assert not torch.equal(without, local(alg.noise_key))

"""What a run discloses: private outputs only among the private ones, diagnostics labelled and
withheld when protected, noise that cannot be regenerated from the spec, caveats complete."""

from __future__ import annotations

import json

import pytest
import torch

from dpfl import runner
from dpfl.algorithms import algorithm_class, registered_algorithms
from dpfl.errors import SpecError
from dpfl.privacy.disclosure import DIAGNOSTICS_LABEL
from dpfl.privacy.events import VoteEvent, from_json, public_event, to_json, with_withheld, withheld_fields
from dpfl.spec import parse_spec
from tests.factories import data_dir

VOTING = {
    "algorithm": "ae_dpfl",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "params": {"queries": 20, "public_pool": 100, "student_epochs": 2},
    "privacy": {"noise_multiplier": 20.0},
}
ISRL = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 1,
    "params": {"lr": 1.0, "batch_size": 64, "clip": 1.0},
    "privacy": {"noise_multiplier": 1000.0},
}


def _initial(raw: dict) -> torch.Tensor:
    algorithm = runner.prepare(parse_spec(raw))
    return algorithm.layout.flatten_module(algorithm.model)


def _run(raw: dict, **kwargs) -> runner.RunResult:
    return runner.run(parse_spec(raw), **kwargs)


def test_a_vote_histogram_is_withheld_from_every_public_form():
    vote = VoteEvent(4.0, 1.0, (7.0, 2.0, 1.0))
    assert public_event(vote) == VoteEvent(4.0, 1.0, None)
    assert withheld_fields(vote) == {"counts": [7.0, 2.0, 1.0]}
    assert withheld_fields(public_event(vote)) is None
    # the accountant path puts the histogram back, exactly
    back = from_json(with_withheld(to_json(public_event(vote)), withheld_fields(vote)))
    assert back == vote


def test_voting_result_serves_no_noiseless_vote():
    result = _run(VOTING)
    data = json.loads(json.dumps(result.to_json()))
    assert len(data["ledger"]) == 20
    assert all(entry["event"]["counts"] is None for entry in data["ledger"])
    # the in-process ledger keeps them for the data-dependent accountant
    assert all(e.event.counts is not None for e in result.ledger.entries)
    final = data["final"]
    assert set(final) == {
        "round", "accuracy", "balanced_accuracy", "loss", "epsilon", "diagnostics",
        "queries_answered", "label_accuracy", "votes_cached", "epsilon_data_independent",
    }  # fmt: skip
    noiseless = {"noiseless_label_accuracy", "mean_vote_gap", "majority_agreement", "epsilon_data_dependent"}
    assert noiseless <= set(final["diagnostics"])
    assert final["diagnostics"]["noiseless_label_accuracy"] == pytest.approx(0.9)  # 18 of 20 digits votes
    assert data["diagnostics"]["label"] == DIAGNOSTICS_LABEL


def test_isrl_batch_sizes_clip_fractions_and_train_loss_are_diagnostics():
    final = _run(ISRL).to_json()["final"]
    assert set(final) == {"round", "accuracy", "balanced_accuracy", "loss", "epsilon", "diagnostics"}
    assert set(final["diagnostics"]) == {"clip_fraction", "batch_size", "train_loss"}
    assert final["diagnostics"]["clip_fraction"] == pytest.approx(1.0)  # C = 1 clips every digits gradient


@pytest.mark.parametrize("name", registered_algorithms())
def test_private_metrics_are_declared_as_a_set_of_names(name):
    cls = algorithm_class(name)
    assert isinstance(cls.private_metrics, frozenset)
    assert "train_loss" not in cls.private_metrics


def test_seeded_noise_is_regenerable_and_shared_across_sigmas():
    """The audit's finding, kept as the documented behaviour of simulation: same seed, same noise."""
    w0 = _initial(ISRL)
    a = _run(ISRL).final_params - w0
    b = _run(ISRL | {"privacy": {"noise_multiplier": 4000.0}}).final_params - w0
    assert torch.corrcoef(torch.stack([a, b]))[0, 1] > 0.999


def test_protected_runs_draw_independent_noise_and_withhold_diagnostics():
    w0 = _initial(ISRL)
    a = _run(ISRL, protected=True)
    b = _run(ISRL | {"privacy": {"noise_multiplier": 4000.0}}, protected=True)
    corr = torch.corrcoef(torch.stack([a.final_params - w0, b.final_params - w0]))[0, 1]
    assert abs(float(corr)) < 0.1  # 650 parameters: independent noise gives |corr| ~ 0.04
    data = a.to_json()
    assert data["privacy"]["noise_source"] == "entropy"
    assert data["diagnostics"] == {"label": DIAGNOSTICS_LABEL, "withheld": True}
    assert data["final"]["diagnostics"] == {}
    assert a.label_histogram is None and a.users is None
    assert data["spec"]["seed"] == 0  # the secret key is never part of the result
    assert not any(c["kind"] == "simulation" for c in data["privacy"]["caveats"])


def test_seeded_noise_is_refused_on_a_protected_dataset():
    spec = parse_spec(ISRL | {"privacy": {"noise_multiplier": 5.0, "noise_source": "seeded"}})
    with pytest.raises(SpecError, match="has a privacy budget") as err:
        runner.run(spec, protected=True)
    assert err.value.field == "privacy.noise_source"


def test_entropy_can_be_asked_for_in_simulation_too():
    result = _run(ISRL | {"privacy": {"noise_multiplier": 5.0, "noise_source": "entropy"}})
    assert result.privacy.noise_source == "entropy" and result.protected


def test_a_seeded_run_says_it_is_a_simulation():
    result = _run(ISRL)
    caveats = result.privacy.caveats
    assert [c.kind for c in caveats] == ["simulation"]
    assert "anyone holding the spec can regenerate them" in caveats[0].text
    assert not caveats[0].breaks_guarantee
    # issue 39, measurement 9: the mechanism is covered, the data is not protected
    privacy = result.to_json()["privacy"]
    assert (privacy["guaranteed"], privacy["protects_data"]) == (True, False)


def test_pca_fitted_on_training_rows_is_a_caveat_that_breaks_the_guarantee():
    raw = ISRL | {"dataset": {"name": "digits", "silos": 4, "features": {"pca": 10}}}
    privacy = _run(raw).to_json()["privacy"]
    kinds = [c["kind"] for c in privacy["caveats"]]
    assert kinds == ["simulation", "preprocessing"]
    assert privacy["caveats"][1]["text"] == (
        "PCA to 10 components fitted on the training rows, without noise: not covered by the ledger"
    )
    assert privacy["guaranteed"] is False
    assert "PCA to 10 components" in privacy["warning"]


def test_standardised_heart_disease_and_a_trusted_aggregator_are_caveats():
    raw = {
        "algorithm": "uldp_avg",
        "dataset": {
            "name": "heart",
            "silos": 4,
            "partition": {"kind": "natural"},
            "users": {"kind": "uniform", "count": 20},
        },
        "model": {"name": "logreg"},
        "rounds": 1,
        "params": {"local_epochs": 1},
        "privacy": {"noise_multiplier": 5.0},
    }  # fmt: skip
    caveats = {c.kind: c for c in _run(raw, data_dirs=[data_dir()]).privacy.caveats}
    assert set(caveats) == {"simulation", "preprocessing", "trusted"}
    assert "standardised with the training rows' mean and standard deviation" in caveats["preprocessing"].text
    assert caveats["trusted"].text.startswith("secure aggregation")
    assert not caveats["trusted"].breaks_guarantee


def test_a_protected_run_protects_its_data_and_says_how_it_was_evaluated():
    privacy = _run(ISRL, protected=True).to_json()["privacy"]
    assert (privacy["guaranteed"], privacy["protects_data"]) == (True, True)
    assert [c["kind"] for c in privacy["caveats"]] == ["evaluation"]

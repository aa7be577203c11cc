"""The ISRL-DP paper's MNIST task: even vs odd digits (`labels: parity`), 1,238 records per silo
(`records_per_silo`), drawn the same way for the run and for the ε preview's partition chart."""

import gc
import math
import weakref
from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.data import load_dataset
from dpfl.errors import SpecError
from dpfl.spec import load_spec, parse_spec
from tests.factories import data_dir

PAPER = Path(__file__).resolve().parents[2] / "configs/paper/isrl_mnist_paper.yaml"


def test_parity_relabels_after_the_pairs_are_drawn_and_each_silo_keeps_1238():
    spec = load_spec(PAPER.read_text())
    assert (spec.dataset.labels, spec.dataset.records_per_silo) == ("parity", 1238)
    algorithm = runner.prepare(spec, data_dirs=[data_dir()])
    data = algorithm.data
    assert data.num_classes == 2 and data.silo_sizes.tolist() == [1238] * 25
    # each silo is one (even, odd) digit pair, so it holds both labels, about half each
    histogram = data.label_histogram
    assert histogram.shape == (25, 2) and (histogram.min(axis=1) > 500).all()
    assert set(np.unique(data.y_test.numpy()).tolist()) == {0, 1}
    # K = ⌊1238·√24/(2√50)⌋ = 428: the paper's sampling rate q ≈ 0.346
    assert algorithm.rates == pytest.approx(np.full(25, 428 / 1238))


def test_federate_is_the_runs_own_split():
    spec = parse_spec(
        {
            "algorithm": "isrl_mbsgd",
            "dataset": {"name": "digits", "silos": 4, "records_per_silo": 100, "labels": "parity"},
            "privacy": {"epsilon": 2.0},
        }
    )
    algorithm = runner.prepare(spec)
    dataset, split, owners = runner.federate(load_dataset("digits"), spec.dataset, seed=spec.seed)
    assert owners is None and split.sizes.tolist() == [100] * 4
    assert (split.label_histogram() == algorithm.data.label_histogram).all()
    assert dataset.num_classes == 2


def test_records_per_silo_cannot_go_with_users_first():
    with pytest.raises(SpecError, match="records_per_silo"):
        parse_spec(
            {
                "algorithm": "uldp_avg",
                "dataset": {
                    "name": "digits",
                    "silos": 4,
                    "records_per_silo": 100,
                    "users": {"kind": "zipf", "count": 20, "silo_alpha": 2.0},
                },
            }
        )


@pytest.mark.slow
def test_the_papers_task_trains_to_its_floor():
    spec = load_spec(PAPER.read_text()).model_copy(update={"rounds": 20, "eval_every": 20})
    result = runner.run(spec, data_dirs=[data_dir()])
    assert result.final.accuracy >= 0.85  # even vs odd, ε = 3 (50 rounds: 0.907)
    assert result.epsilon == pytest.approx(3.0, rel=1e-3)


def test_federate_draws_a_specs_silos_and_users_once_and_hands_out_read_only_copies():
    spec = parse_spec(
        {
            "algorithm": "uldp_avg",
            "dataset": {"name": "digits", "silos": 3, "users": {"count": 20}},
            "privacy": {"epsilon": 2.0},
        }
    )
    digits = load_dataset("digits")
    _, split, owners = runner.federate(digits, spec.dataset, seed=3)
    _, again, owners_again = runner.federate(digits, spec.dataset, seed=3)
    assert split is not again and split.silo_indices is not again.silo_indices  # lists of their own
    assert all(a is b for a, b in zip(split.silo_indices, again.silo_indices, strict=True))  # drawn once
    assert all(a is b for a, b in zip(owners.user_ids, owners_again.user_ids, strict=True))
    with pytest.raises(ValueError, match="read-only"):
        split.silo_indices[0][0] = 1
    with pytest.raises(ValueError, match="read-only"):
        owners.user_ids[0][0] = 1
    # another seed, another option, or a dataset loaded afresh draws again, as the first time did
    _, other_seed, _ = runner.federate(digits, spec.dataset, seed=4)
    fewer = spec.dataset.model_copy(update={"silos": 2})
    _, other_spec, _ = runner.federate(digits, fewer, seed=3)
    _, reloaded, _ = runner.federate(load_dataset("digits"), spec.dataset, seed=3)
    assert [s.tolist() for s in other_seed.silo_indices] != [s.tolist() for s in split.silo_indices]
    assert len(other_spec.silo_indices) == 2
    assert [s.tolist() for s in reloaded.silo_indices] == [s.tolist() for s in split.silo_indices]
    assert reloaded.silo_indices[0] is not split.silo_indices[0]


def test_federate_forgets_a_dataset_nothing_else_holds():
    spec = parse_spec(
        {"algorithm": "isrl_mbsgd", "dataset": {"name": "digits", "silos": 3}, "privacy": {"epsilon": 2.0}}
    )
    digits = load_dataset("digits")
    runner.federate(digits, spec.dataset, seed=0)
    gone = weakref.ref(digits)
    del digits
    gc.collect()
    assert gone() is None


def test_federate_keeps_specs_apart_that_json_would_merge():
    # JSON writes an infinite α as null, the same as leaving it out (the default, 0.5); the one
    # spec is refused, the other drawn, in either order.
    default = parse_spec(
        {
            "algorithm": "isrl_mbsgd",
            "dataset": {"name": "digits", "silos": 4, "partition": {"kind": "dirichlet"}},
            "privacy": {"epsilon": 2.0},
        }
    )
    infinite = default.dataset.model_copy(
        update={"partition": default.dataset.partition.model_copy(update={"alpha": math.inf})}
    )
    digits = load_dataset("digits")
    runner.federate(digits, default.dataset, seed=0)
    with pytest.raises(SpecError, match="alpha"):
        runner.federate(digits, infinite, seed=0)

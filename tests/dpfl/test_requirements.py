"""What an algorithm declares it needs (`models`, `binary_labels`, `requires_users`,
`default_datasets`) is refused by one check, `runner.check`, before any data is loaded; the
same check runs in `prepare`, so `dpfl run` refuses in one line what the API refuses with 422."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.algorithms import algorithm_class, registered_algorithms
from dpfl.data import dataset_info, load_dataset, registered_datasets
from dpfl.errors import DatasetUnavailable, SpecError, UnknownNameError
from dpfl.models import registered_models
from dpfl.spec import parse_spec
from tests.factories import data_dir, run_cli

USERS = (
    "say who owns each record, e.g. `users: {kind: zipf, count: 100}` (kinds: uniform, balanced, zipf, "
    "natural)."
)


def spec(algorithm: str, **changes):
    base = {"algorithm": algorithm, "dataset": {"name": "digits", "silos": 4}, "rounds": 2}
    return parse_spec(base | {"privacy": {"epsilon": 3.0}} | changes)


@pytest.mark.parametrize(
    ("given", "field", "reason"),
    [
        (spec("gdp_gd"), "model.name", "must be `logreg` for gdp_gd; got 'mlp'."),
        (
            spec("gdp_gd", model={"name": "logreg"}, dataset={"name": "mnist"}),
            "dataset.name",
            "must be a dataset with two classes for gdp_gd (one of adult, breast_cancer, creditcard, csv, "
            "heart, logistic); 'mnist' has 10.",
        ),
        (spec("uldp_sgd"), "dataset.users", f"is required for uldp_sgd: {USERS}"),
        (spec("fedavg"), "privacy", "must be omitted: fedavg is not private."),
        (spec("uldp_avg", privacy=None), "dataset.users", f"is required for uldp_avg: {USERS}"),
        (
            spec("isrl_mbsgd", privacy={"mu": 1.0}),
            "privacy.mu",
            "is a μ-GDP target, offered by algorithms of notion `gdp`; give `epsilon` or `noise_multiplier` "
            "for isrl_mbsgd.",
        ),
    ],
)
def test_check_refuses_what_the_algorithm_declares_naming_the_field(given, field, reason):
    with pytest.raises(SpecError) as info:
        runner.check(given)  # mnist's files are never looked for: nothing is loaded
    assert (info.value.field, info.value.reason) == (field, reason)


def test_check_names_an_unregistered_model_or_dataset():
    with pytest.raises(
        UnknownNameError,
        match=r"^unknown model 'resnet'; registered: cifar_cnn, cnn, fraudnet, lenet, logreg, mlp, "
        r"resnet_gn$",
    ):
        runner.check(spec("isrl_mbsgd", model={"name": "resnet"}))
    with pytest.raises(UnknownNameError, match=r"^unknown dataset 'nope'; registered: adult, "):
        runner.check(spec("isrl_mbsgd", dataset={"name": "nope"}))


def test_a_csv_with_three_classes_is_refused_once_loaded(tmp_path):
    table = tmp_path / "three.csv"
    table.write_text("a,b,y\n" + "".join(f"{i},{i % 7},{i % 3}\n" for i in range(60)))
    given = spec(
        "gdp_gd",
        model={"name": "logreg"},
        dataset={"name": "csv", "silos": 2, "options": {"path": str(table), "label": "y"}},
    )
    assert runner.check(given).name == "gdp_gd"  # a csv's classes are unknown until it is read
    with pytest.raises(SpecError) as info:
        runner.prepare(given)
    assert (info.value.field, info.value.reason) == (
        "dataset.name",
        "must be a dataset with two classes for gdp_gd (one of adult, breast_cancer, creditcard, csv, "
        "heart, logistic); 'csv' has 3.",
    )


@pytest.mark.parametrize("name", ["ae_dpfl", "knn_dpfl"])
def test_the_voting_default_datasets_are_those_the_defaults_fit(name):
    # The declared list stands for what the data says: a test split larger than the default
    # public pool, and for kNN at least its default PCA components of features.
    cls = algorithm_class(name)
    params = cls.Params()
    fits = {}
    for dataset in registered_datasets():
        if dataset == "csv":
            continue
        folders = [data_dir()] if dataset_info(dataset).needs_files else []
        try:
            data = load_dataset(dataset, search_dirs=folders)
        except DatasetUnavailable:  # its files are not in the shared folder (CIFAR-10)
            continue
        enough_features = (
            getattr(params, "features", "raw") != "pca" or data.num_features >= params.pca_components
        )
        fits[dataset] = len(data.y_test) > params.public_pool and enough_features
    assert {d for d, ok in fits.items() if ok} == set(cls.default_datasets) & set(fits)
    assert runner.accepted_datasets(cls) == sorted(
        cls.default_datasets, key=lambda d: (dataset_info(d).needs_files, d)
    )


def test_unrestricted_algorithms_accept_every_model_and_dataset():
    for name in registered_algorithms():
        cls = algorithm_class(name)
        if cls.models is None:
            assert runner.accepted_models(cls) == registered_models(), name
        if cls.default_datasets is None and not cls.binary_labels:
            assert sorted(runner.accepted_datasets(cls)) == registered_datasets(), name


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["algorithm=gdp_localnewton"],
            "error: `model.name` must be `logreg` for gdp_localnewton; got 'mlp'.\n",
        ),
        (["algorithm=uldp_avg"], f"error: `dataset.users` is required for uldp_avg: {USERS}\n"),
        (
            ["algorithm=ae_dpfl", "params.public_pool=1000"],
            "error: `params.public_pool` must be between 0 and 358 (the dataset has 359 test records and at "
            "least one must stay for testing); got 1000.\n",
        ),
        (
            ["model.hidden=abc"],
            "error: `model.hidden` must list positive integer widths, e.g. [64]; got 'abc'.\n",
        ),
        (
            [
                "algorithm=dp_fedavg",
                "params={adaptive_clip: true, count_noise: 0.5}",
                "privacy={noise_multiplier: 2}",
            ],
            "error: `params.count_noise` must be > σ/2 = 1 so that the update noise stays finite "
            "(σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½)); got 0.5.\n",
        ),
        (
            [
                "algorithm=uldp_avg_w",
                "dataset.users={kind: uniform, count: 100}",
                "participation=2",
                "params.secure_weighting=true",
            ],
            "error: `participation` must be all silos with `params.secure_weighting`.\n",
        ),
    ],
)
def test_dpfl_run_refuses_the_same_specs_in_one_line(capsys, tmp_path, sets, message):
    given = tmp_path / "spec.yaml"
    given.write_text(
        "algorithm: isrl_mbsgd\ndataset: {name: digits, silos: 4}\nmodel: {name: mlp, hidden: [64]}\n"
        "rounds: 2\nprivacy: {epsilon: 3.0}\n"
    )
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = run_cli(capsys, "run", str(given), *args)
    assert (code, out) == (1, "")
    assert [line for line in err.splitlines() if line.startswith("error:")] == [message.rstrip("\n")]
    assert err.endswith(message)


@pytest.mark.parametrize(
    ("given", "field", "reason"),
    [
        (
            spec("ae_dpfl", params={"public_pool": 100, "queries": 100}),
            "privacy.noise_multiplier",
            "must be one σ for all agents' votes; got [1.0, 2.0].",
        ),
        (spec("uldp_naive"), "privacy", "uldp_naive takes one noise multiplier for all silos."),
        (
            spec(
                "uldp_avg", dataset={"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 100}}
            ),
            "privacy",
            "uldp_avg takes one noise multiplier for all silos.",
        ),
    ],
)
def test_a_sigma_per_silo_is_refused_by_check_noise_and_by_setup(given, field, reason):
    algorithm = runner.prepare(given, data_dirs=[data_dir()])
    for hook in (algorithm.check_noise, algorithm.setup):
        with pytest.raises(SpecError) as info:
            hook(np.array([1.0, 2.0, 1.0, 1.0]))
        assert (info.value.field, info.value.reason) == (field, reason), hook

"""One validation path (issue 18, bug 1): what a run's setup refuses is refused at submission.

Every spec the worker would fail on in its first second (a model, dataset or users its
algorithm cannot take, a public pool larger than the test split, a model option of the wrong
kind) is a 422 naming the field, from `POST /api/runs` and from the preview, never a 201 and
a failed run; and every registered algorithm, with the new-run form's defaults adjusted by
the requirements `GET /api/algorithms` advertises, is accepted and runs to success.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from dpfl.data import registered_datasets
from dpfl.models import registered_models
from tests.backend.conftest import make_settings, run_here

pytestmark = pytest.mark.service

# The new-run form's defaults (frontend), with few rounds so every algorithm runs in seconds.
FORM = {
    "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
    "model": {"name": "mlp", "hidden": [64]},
    "rounds": 2,
    "eval_every": 5,
    "seed": 0,
}
FORM_PRIVACY = {"epsilon": 3.0, "delta": 1e-5, "accountant": "rdp"}
USERS_ADVICE = (
    "say who owns each record, e.g. `users: {kind: zipf, count: 100}` "
    "(kinds: uniform, balanced, zipf, natural)."
)
BINARY = "adult, breast_cancer, creditcard, csv, heart, logistic"


def form_spec(name: str, **changes) -> dict:
    return FORM | {"algorithm": name, "privacy": FORM_PRIVACY} | changes


def field_error(loc: list[str], msg: str) -> dict:
    return {"detail": [{"loc": ["body", *loc], "msg": msg, "type": "value_error"}], "error": "SpecError"}


REFUSED = [
    pytest.param(
        form_spec("gdp_localnewton"),
        ["model", "name"],
        "must be `logreg` for gdp_localnewton; got 'mlp'.",
        id="gdp_localnewton-mlp",
    ),
    pytest.param(
        form_spec("localnewton", privacy=None, model={"name": "cnn"}),
        ["model", "name"],
        "must be `logreg` for localnewton; got 'cnn'.",
        id="localnewton-cnn",
    ),
    pytest.param(
        form_spec("gdp_localnewton", model={"name": "logreg"}),
        ["dataset", "name"],
        f"must be a dataset with two classes for gdp_localnewton (one of {BINARY}); 'digits' has 10.",
        id="gdp_localnewton-digits",
    ),
    pytest.param(
        form_spec("ae_dpfl", params={"public_pool": 1000}),
        ["params", "public_pool"],
        "must be between 0 and 358 (the dataset has 359 test records and at least one must stay for "
        "testing); got 1000.",
        id="ae_dpfl-pool",
    ),
    pytest.param(
        form_spec("knn_dpfl"),
        ["params", "public_pool"],
        "must be between 0 and 358 (the dataset has 359 test records and at least one must stay for "
        "testing); got 1000.",
        id="knn_dpfl-pool",
    ),
    pytest.param(
        form_spec("uldp_avg"),
        ["dataset", "users"],
        f"is required for uldp_avg: {USERS_ADVICE}",
        id="uldp_avg-users",
    ),
    pytest.param(
        form_spec("uldp_group"),
        ["dataset", "users"],
        f"is required for uldp_group: {USERS_ADVICE}",
        id="uldp_group-users",
    ),
    pytest.param(
        form_spec("isrl_mbsgd", model={"name": "mlp", "hidden": "abc"}),
        ["model", "hidden"],
        "must list positive integer widths, e.g. [64]; got 'abc'.",
        id="hidden-abc",
    ),
    pytest.param(
        form_spec("fedavg", privacy=None, model={"name": "mlp", "hidden": [64, 0]}),
        ["model", "hidden"],
        "must list positive integer widths, e.g. [64]; got [64, 0].",
        id="hidden-zero-not-private",
    ),
    pytest.param(
        form_spec("fedavg", privacy=None, model={"name": "mlp", "width": 3}),
        ["model", "width"],
        "is not an option of model 'mlp'; allowed: hidden.",
        id="unknown-model-option",
    ),
    pytest.param(
        form_spec("fedavg", privacy=None, model={"name": "cnn"}),
        ["model", "name"],
        "must take the dataset's inputs: 'cnn' needs images (H, W) or (C, H, W); got (64,).",
        id="cnn-on-flat-digits",
    ),
    # Checks that need the calibrated σ: `runner.project` makes them once σ is known, for every
    # target (an ε target too: admission calibrates it as the worker does).
    pytest.param(
        form_spec(
            "isrl_mbsgd",
            dataset={"name": "digits", "silos": 4},
            rounds=20,
            privacy={"epsilon": 1e-5, "delta": 1e-5, "accountant": "rdp"},
        ),
        ["privacy", "epsilon"],
        "1e-05 cannot be met at δ = 1e-5 with a noise multiplier ≤ 100000; raise ε or δ.",
        id="isrl_mbsgd-unreachable-epsilon",
    ),
    pytest.param(
        form_spec("dp_fedavg", params={"adaptive_clip": True}),
        ["params", "count_noise"],
        "must be > σ/2 = 0.4484 so that the update noise stays finite "
        "(σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½)); got 0.05.",
        id="dp_fedavg-adaptive-default-count_noise",
    ),
    pytest.param(
        form_spec("isrl_mbsgd", privacy={"epsilon": 1000.0, "delta": 1e-5, "accountant": "pld"}),
        ["privacy", "epsilon"],
        None,  # the pld σ floor: its message gives the σ it found
        id="isrl_mbsgd-pld-floor",
    ),
    pytest.param(
        form_spec(
            "dp_fedavg",
            params={"adaptive_clip": True, "count_noise": 0.5},
            privacy={"noise_multiplier": 2.0, "delta": 1e-5, "accountant": "rdp"},
        ),
        ["params", "count_noise"],
        "must be > σ/2 = 1 so that the update noise stays finite (σ_Δ = (σ⁻² − (2σ_b)⁻²)^(−½)); got 0.5.",
        id="dp_fedavg-count_noise",
    ),
    pytest.param(
        form_spec(
            "uldp_avg_w",
            participation=5,
            dataset=FORM["dataset"] | {"users": {"kind": "uniform", "count": 100}},
            params={"secure_weighting": True},
        ),
        ["participation"],
        "must be all silos with `params.secure_weighting`.",
        id="uldp_avg_w-secure-participation",
    ),
    pytest.param(
        form_spec(
            "sdp_mbsgd",
            params={"randomizer": "binomial"},
            privacy={"noise_multiplier": 0.05, "delta": 1e-5, "accountant": "pld"},
        ),
        ["privacy", "noise_multiplier"],
        "must be ≥ 0.06667 for `params.randomizer: binomial` (a round's ε′ = 1/σ ≤ 15, Cheu et al.'s "
        "theorem); got 0.05.",
        id="sdp_mbsgd-binomial-sigma",
    ),
]


@pytest.mark.parametrize(("spec", "loc", "msg"), REFUSED)
def test_what_the_worker_would_refuse_is_422_at_submission_and_in_the_preview(client, spec, loc, msg):
    answers = []
    for path in ("/api/runs", "/api/privacy/project"):
        res = client.post(path, json=spec)
        answers.append(res.json())
        if msg is None:
            assert res.status_code == 422 and res.json()["detail"][0]["loc"] == ["body", *loc], path
        else:
            assert (res.status_code, res.json()) == (422, field_error(loc, msg)), path
    assert answers[0] == answers[1]
    # every point of a sweep is admitted by the same projection, and blamed on the base's field
    res = client.post("/api/sweeps", json={"base": spec, "grid": {"seed": [0, 1]}})
    assert res.status_code == 422, res.json()
    (error,) = res.json()["detail"]
    assert error["loc"] == ["body", "base", *loc]
    assert error["msg"] == f"{answers[0]['detail'][0]['msg']} (point 1 of 2: seed=0)"
    assert client.get("/api/runs").json()["total"] == 0


@pytest.fixture
def sqlite_client(tmp_path):
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    settings = make_settings(tmp_path, url)
    with TestClient(create_app(settings)) as client:
        client.settings = settings
        yield client


def adjusted(entry: dict) -> dict:
    """Returns the form's defaults for `entry` of the catalogue, adjusted by its requirements."""
    spec = FORM | {"algorithm": entry["name"], "params": entry["defaults"]}
    if entry["private"]:
        spec["privacy"] = FORM_PRIVACY
    if "mlp" not in entry["models"]:
        spec["model"] = {"name": entry["models"][0]}
    dataset = dict(spec["dataset"])
    if "digits" not in entry["datasets"]:
        dataset["name"] = entry["datasets"][0]
    if entry["requires_users"]:
        dataset["users"] = {"kind": "uniform", "count": 100}
    return spec | {"dataset": dataset}


@pytest.mark.slow
def test_every_algorithm_with_the_form_defaults_it_advertises_is_accepted_and_succeeds(sqlite_client):
    catalogue = sqlite_client.get("/api/algorithms").json()
    outcomes = {}
    for entry in catalogue:
        spec = adjusted(entry)
        preview = sqlite_client.post("/api/privacy/project", json=spec)
        sweep = sqlite_client.post("/api/sweeps", json={"base": spec, "grid": {"seed": [1]}})
        res = sqlite_client.post("/api/runs", json=spec)
        answers = (entry["name"], preview.json(), sweep.json(), res.json())
        assert (preview.status_code, sweep.status_code, res.status_code) == (200, 201, 201), answers
        # what admission reserved is what the preview showed and the worker planned
        assert res.json()["projected_epsilon"] == preview.json()["epsilon"], answers
        run_here(sqlite_client.settings, res.json()["id"])
        run = sqlite_client.get(f"/api/runs/{res.json()['id']}").json()
        outcomes[entry["name"]] = (run["status"], run["error"], run["current_round"])
    assert outcomes == {entry["name"]: ("succeeded", None, 2) for entry in catalogue}


def test_the_catalogue_says_what_each_algorithm_takes(client):
    by_name = {a["name"]: a for a in client.get("/api/algorithms").json()}
    everything = registered_datasets()
    bundled_first = [
        "breast_cancer",
        "digits",
        "logistic",
        "synthetic",
        "adult",
        "cifar10",
        "creditcard",
        "csv",
        "digit_domains",
        "femnist",
        "heart",
        "mnist",
        "svhn",
        "usps",
    ]
    assert sorted(bundled_first) == everything
    for name in ("gdp_localnewton", "gdp_gd", "localnewton"):
        entry = by_name[name]
        assert (entry["models"], entry["requires_users"], entry["binary_labels"]) == (["logreg"], False, True)
        assert entry["datasets"] == ["breast_cancer", "logistic", "adult", "creditcard", "csv", "heart"]
    for name in ("uldp_avg", "uldp_avg_w", "uldp_group", "uldp_sgd"):
        entry = by_name[name]
        assert (entry["models"], entry["datasets"]) == (registered_models(), bundled_first)
        assert (entry["requires_users"], entry["binary_labels"]) == (True, False)
    assert by_name["ae_dpfl"]["datasets"] == [
        *("logistic", "synthetic", "adult", "cifar10", "digit_domains", "mnist", "svhn", "usps")
    ]
    assert by_name["knn_dpfl"]["datasets"] == [
        *("synthetic", "adult", "cifar10", "digit_domains", "mnist", "svhn", "usps")
    ]
    for name in ("ae_dpfl", "knn_dpfl"):
        assert (by_name[name]["models"], by_name[name]["requires_users"]) == (registered_models(), False)
    for name in ("fedavg", "isrl_mbsgd", "uldp_naive", "dp_fedavg"):
        entry = by_name[name]
        assert (entry["models"], entry["datasets"]) == (registered_models(), bundled_first)
        assert (entry["requires_users"], entry["binary_labels"]) == (False, False)

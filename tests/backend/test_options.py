"""GET /api/options: the names a run may use, each from its registry, with exact contents."""

from __future__ import annotations

import pytest

from dpfl.data import partition_kinds
from dpfl.models import registered_models
from dpfl.privacy.accountants import registered_accountants

pytestmark = pytest.mark.service


@pytest.fixture
def options(client) -> dict:
    res = client.get("/api/options")
    assert res.status_code == 200
    return res.json()


def test_every_registered_name_is_offered(options):
    assert [m["name"] for m in options["models"]] == registered_models()
    assert [k["name"] for k in options["partition_kinds"]] == partition_kinds()
    assert [a["name"] for a in options["accountants"]] == registered_accountants()
    assert [k["name"] for k in options["user_kinds"]] == ["balanced", "natural", "uniform", "zipf"]
    assert options["notions"] == ["none", "record", "user", "agent", "instance", "gdp"]
    assert options["default_accountant"] == "rdp"
    assert options["calibrations"] == ["accountant", "paper"]
    assert options["spec_defaults"] == {"rounds": 20, "dataset.silos": 10, "seed": 0}  # a blank box's value


def test_models_say_whether_they_take_hidden(options):
    models = {m["name"]: m for m in options["models"]}
    assert models["mlp"]["takes_hidden"] is True and models["mlp"]["options"] == {"hidden": [64]}
    assert [n for n, m in models.items() if m["takes_hidden"]] == ["mlp"]
    assert models["resnet_gn"]["options"] == {"depth": 8, "width": 16, "groups": 16}
    assert models["logreg"]["description"] == (
        "Softmax (multinomial logistic) regression: one linear layer on the flattened input."
    )


def test_partition_kinds_list_the_options_each_takes_with_defaults_and_bounds(options):
    kinds = {k["name"]: k["options"] for k in options["partition_kinds"]}
    assert {name: sorted(o) for name, o in kinds.items()} == {
        "dirichlet": ["alpha", "min_size"],
        "iid": [],
        "label_sets": ["labels_per_silo"],
        "natural": [],
        "pairs": [],
        "quantity": ["alpha", "min_size"],
        "shards": ["labels_per_silo"],
    }
    assert kinds["dirichlet"]["alpha"]["default"] == 0.5
    assert kinds["dirichlet"]["alpha"]["anyOf"][0] == {"exclusiveMinimum": 0, "type": "number"}
    assert kinds["dirichlet"]["min_size"]["default"] == 1
    assert kinds["shards"]["labels_per_silo"]["anyOf"][0] == {"minimum": 1, "type": "integer"}
    users = {k["name"]: sorted(k["options"]) for k in options["user_kinds"]}
    assert users["natural"] == [] and users["zipf"] == [
        "count",
        "main_silo_probability",
        "silo_alpha",
        "zipf_alpha",
    ]


def test_accountants_say_which_may_be_a_headline(options):
    accountants = {a["name"]: a for a in options["accountants"]}
    assert {n: a["headline_always"] for n, a in accountants.items()} == {
        "gdp": False,
        "group": True,
        "pate": False,
        "pld": True,
        "rdp": True,
    }
    assert (accountants["pate"]["data_dependent"], accountants["gdp"]["approximates"]) == (True, True)
    assert accountants["pate"]["headline"].startswith("never: its ε is computed from private data")
    assert accountants["gdp"]["headline"].startswith("only for plans it accounts exactly")

"""GET /api/algorithms: the catalogue generated from the dpfl registry."""

from __future__ import annotations

import pytest

from dpfl.algorithms import algorithm_class, registered_algorithms

pytestmark = pytest.mark.service


def test_lists_every_registered_algorithm_by_name(client):
    res = client.get("/api/algorithms")
    assert res.status_code == 200
    names = [a["name"] for a in res.json()]
    assert names == sorted(registered_algorithms())
    assert len(names) >= 20 and {"fedavg", "isrl_mbsgd", "isrl_spider_alt", "uldp_avg"} <= set(names)


def test_isrl_mbsgd_shows_its_params_schema_and_defaults(client):
    by_name = {a["name"]: a for a in client.get("/api/algorithms").json()}
    isrl = by_name["isrl_mbsgd"]
    assert (isrl["notion"], isrl["private"]) == ("record", True)
    assert isrl["paper"].startswith("000: Lowy, Ghafelebashi & Razaviyayn")
    assert isrl["summary"] == "ISRL-DP minibatch SGD; each silo's messages are record-level DP"
    properties = isrl["params_schema"]["properties"]
    assert {k: properties[k]["default"] for k in ("lr", "batch_size", "clip")} == {
        "lr": 0.5,
        "batch_size": 64,
        "clip": 1.0,
    }
    assert properties["batch_size"]["type"] == "integer" and properties["clip"]["exclusiveMinimum"] == 0
    assert isrl["params_schema"]["additionalProperties"] is False
    assert isrl["defaults"] == {"lr": 0.5, "batch_size": 64, "clip": 1.0}
    fedavg = by_name["fedavg"]
    assert (fedavg["notion"], fedavg["private"]) == ("none", False)
    assert fedavg["defaults"] == {"lr": 0.1, "local_steps": 5, "batch_size": 32}


@pytest.mark.parametrize("name", registered_algorithms())
def test_every_entry_matches_its_params_model(client, name):
    entry = next(a for a in client.get("/api/algorithms").json() if a["name"] == name)
    params = algorithm_class(name).Params
    assert entry["params_schema"] == params.model_json_schema()
    assert params.model_validate(entry["defaults"]) == params()
    assert set(entry["defaults"]) == set(entry["params_schema"]["properties"])

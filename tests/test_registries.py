"""One registration is the whole of adding an algorithm: a toy registered at test time appears in
the API's catalogue, the CLI, the plots' colour rule and the README check with no other edit.

The form's options come from the same catalogue; tests/browser/test_plugin.py shows the toy
in a real browser, loaded as a plugin by a server and its worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from backend import migrate
from backend.main import create_app
from backend.settings import Settings
from dpfl.algorithms import ALGORITHMS
from dpfl.plots import NEUTRAL_COLOUR, algorithm_colour
from tests.factories import run_cli
from tests.test_readme import algorithm_drift
from tests.toys import NAME, register

SUMMARY = "federated averaging, registered by a test"


@pytest.fixture
def toy() -> Iterator[str]:
    register()
    try:
        yield NAME
    finally:
        ALGORITHMS.remove(NAME)


def test_the_api_catalogue_lists_the_toy_with_what_it_accepts(toy, tmp_path):
    url = f"sqlite:///{tmp_path / 'dpfl.db'}"
    migrate.upgrade(url)
    settings = Settings(home=tmp_path, database_url=url, broker_url="", data_dir="")
    with TestClient(create_app(settings)) as client:
        catalogue = {a["name"]: a for a in client.get("/api/algorithms").json()}
        refused = client.post("/api/privacy/project", json={"algorithm": toy, "privacy": {"epsilon": 1}})
    entry = catalogue[toy]
    assert (entry["notion"], entry["private"], entry["summary"]) == ("none", False, SUMMARY)
    assert entry["defaults"] == {"lr": 0.1, "local_steps": 5, "batch_size": 32}
    assert entry["models"] == catalogue["fedavg"]["models"] and "digits" in entry["datasets"]
    # the checks every algorithm gets come with the registration: a non-private one takes no ε
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "privacy"]


def test_the_cli_lists_and_runs_the_toy(toy, capsys, tmp_path):
    code, out, _ = run_cli(capsys, "algorithms", "--json")
    assert code == 0
    assert {"name": toy, "notion": "none", "paper": "a test's toy", "summary": SUMMARY} in json.loads(out)
    finals = {}
    for name in (toy, "fedavg"):
        spec, result = tmp_path / f"{name}.yaml", tmp_path / f"{name}.json"
        spec.write_text(f"algorithm: {name}\ndataset: {{name: digits, silos: 4}}\nrounds: 3\n")
        code, _, err = run_cli(capsys, "run", str(spec), "--out", str(result))
        assert code == 0, err
        finals[name] = json.loads(result.read_text())["final"]["accuracy"]
    # it trains as the class it inherits does, far above the 10 % of chance on ten digits
    assert finals[toy] == finals["fedavg"] > 0.3


def test_the_toy_is_drawn_as_a_non_private_reference(toy):
    assert algorithm_colour(toy) == NEUTRAL_COLOUR


def test_a_private_name_keeps_its_colour_and_a_missing_one_is_not_grey():
    assert algorithm_colour(NAME) != NEUTRAL_COLOUR  # unregistered: no notion says it is a reference


def test_the_readme_check_names_the_toy_until_its_row_is_written(toy):
    drift = algorithm_drift()
    assert f"no README row for {toy!r}" in drift
    assert any(line.startswith("README counts") for line in drift)

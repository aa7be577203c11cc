"""`dpfl run` writes the result JSON; `dpfl datasets` lists where data is; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dpfl.data.prepared import clear_prepared
from tests.factories import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_run_writes_the_documented_keys(capsys, tmp_path):
    out = tmp_path / "result.json"
    code, _, err = run_cli(
        capsys,
        "run",
        str(ROOT / "configs/fedavg_digits.yaml"),
        "--set",
        "rounds=2",
        "--set",
        "eval_every=1",
        "--out",
        str(out),
    )
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["spec"]["rounds"] == 2
    assert [r["round"] for r in data["rounds"]] == [1, 2]
    assert set(data["rounds"][0]) >= {"round", "accuracy", "loss", "epsilon"}
    assert set(data["final"]) >= {"accuracy", "loss"}
    assert set(data["privacy"]) >= {"epsilon", "delta", "accountant", "noise_multiplier"}
    assert {"ledger", "timings", "spec"} <= set(data)
    assert data["timings"]["threads"] == torch.get_num_threads()
    assert "final accuracy" in err
    assert f"on {torch.get_num_threads()} torch thread" in " ".join(err.split())


def test_private_run_reports_epsilon_and_ledger(capsys, tmp_path):
    out = tmp_path / "result.json"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "algorithm: isrl_mbsgd\ndataset: {name: digits, silos: 4}\nrounds: 3\n"
        "privacy: {noise_multiplier: 2.0, delta: 1.0e-5}\n"
    )
    code, _, err = run_cli(capsys, "run", str(spec), "--out", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["privacy"]["noise_multiplier"] == 2.0
    assert len(data["ledger"]) == 3 * 4
    assert 0 < data["privacy"]["epsilon"] == data["rounds"][-1]["epsilon"]


def test_an_approximate_accountant_is_refused_in_one_line(capsys, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "algorithm: isrl_mbsgd\ndataset: {name: digits, silos: 4}\nrounds: 3\n"
        "privacy: {epsilon: 2.0, delta: 1.0e-5, accountant: gdp}\n"
    )
    code, out, err = run_cli(capsys, "run", str(spec))
    assert (code, out) == (1, "")
    # stderr also holds the progress line; the error is one line, the last
    assert (
        [line for line in err.splitlines() if line.startswith("error:")]
        == err.splitlines()[-1:]
        == [
            "error: `privacy.accountant` must account every planned release exactly; 'gdp' would not: "
            "Poisson-sampled Gaussian accounted by the GDP central limit theorem (approximate; can "
            "underestimate ε). An approximate ε can neither calibrate σ nor be the headline ε; use rdp or "
            "pld; got 'gdp'."
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "rounds=0"], "error: `rounds` input should be greater than or equal to 1; got 0.\n"),
        (["--set", "privacy.epsilon=2"], "error: `privacy` must be omitted: fedavg is not private.\n"),
        (["--set", "rounds"], "error: `--set` must look like field.path=value; got 'rounds'.\n"),
    ],
)
def test_bad_run_input_is_one_line(capsys, args, message):
    code, _, err = run_cli(capsys, "run", str(ROOT / "configs/fedavg_digits.yaml"), *args)
    assert code == 1
    assert err.endswith(message)


def test_missing_spec_file(capsys):
    code, _, err = run_cli(capsys, "run", "nowhere.yaml")
    assert (code, err) == (1, "error: `SPEC` file 'nowhere.yaml' does not exist.\n")


def test_datasets_says_where_each_is(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    code, out, _ = run_cli(capsys, "datasets", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["digits"]["found"] == "bundled or generated"
    assert rows["mnist"]["found"] == "missing: put the files in $DPFL_DATA_DIR/mnist or use --download"
    # a folder of files without a fixed list: where the folder goes, not a CSV's option
    assert rows["femnist"]["found"] == (
        "missing: put its files in $DPFL_DATA_DIR/femnist/ (nothing to download; see its source)"
    )
    assert rows["csv"]["found"] == "your own file (option `path`)"
    (tmp_path / "femnist" / "train").mkdir(parents=True)
    (tmp_path / "femnist" / "train" / "all_data_0.json").write_text("{}")
    _, out, _ = run_cli(capsys, "datasets", "--json")
    assert {row["name"]: row for row in json.loads(out)}["femnist"]["found"] == str(tmp_path / "femnist")
    assert rows["heart"]["silos"] == 4


def test_a_run_without_its_dataset_files_is_one_line_naming_them(capsys, monkeypatch, tmp_path):
    # a fresh process has no MNIST in memory: another test in this one may have loaded it
    clear_prepared()
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    spec = tmp_path / "spec.yaml"
    spec.write_text("algorithm: fedavg\ndataset: {name: mnist, silos: 2}\nmodel: {name: logreg}\nrounds: 1\n")
    code, out, err = run_cli(capsys, "run", str(spec))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("error: 4 dataset file(s) missing: put train-images-")
    assert f"(md5 f68b3c2dcbeaaa9fbdd348bbdeb94873) in {tmp_path / 'empty'}/mnist/" in err
    assert err.endswith("(download=True; `dpfl run --download`).\n")

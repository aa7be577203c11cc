import json

import pytest
import yaml

from tests.factories import data_dir, run_cli


def spec_file(tmp_path, **fields):
    spec = {
        "dataset": {"name": "digits", "silos": 3},
        "model": {"name": "logreg"},
        "rounds": 10,
        "seed": 3,
    } | fields
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(autouse=True)
def datasets(monkeypatch):
    monkeypatch.setenv("DPFL_DATA_DIR", str(data_dir()))


def test_audit_json_of_a_sound_release_at_epsilon_4(tmp_path, capsys):
    path = spec_file(
        tmp_path,
        algorithm="isrl_mbsgd",
        params={"batch_size": 64, "clip": 1.0},
        privacy={"noise_multiplier": 1.0811956543171695, "delta": 1e-5, "accountant": "pld"},
    )
    code, out, err = run_cli(capsys, "audit", str(path), "--trials", "200000", "--json")
    assert code == 0, err
    releases = json.loads(out)["releases"]
    assert json.loads(out)["label"].startswith("not private")
    assert sorted(r["release"] for r in releases) == ["silo-0", "silo-1", "silo-2"]
    for r in releases:
        assert r["max_sensitivity_ratio"] == pytest.approx(1.0, abs=1e-5)
        assert r["epsilon_ledger"] == pytest.approx(4.0, abs=1e-3)  # σ = 1.0812 is ε = 4 by PLD
        assert 1.5 < r["epsilon_lower"] <= r["epsilon_ledger"]
        assert r["trials"] == 200_000 and r["sound"] is True
    black = json.loads(out)["black_box"]  # on by default: 1,000 runs of two rounds per side
    assert (black["trials"], black["rounds"], black["release"], black["verdict"]) == (
        1000, 2, "silo-2", "no violation found",
    )  # fmt: skip
    assert black["neighbours"].startswith("silo 2: a Dirac canary")


def test_audit_flags_uldp_naive_against_its_own_claim(tmp_path, capsys):
    path = spec_file(
        tmp_path,
        algorithm="uldp_naive",
        params={"clip": 0.1},
        dataset={"name": "digits", "silos": 2},
        privacy={"noise_multiplier": 1.0, "delta": 1e-5},
    )
    code, out, err = run_cli(
        capsys, "audit", str(path), "--trials", "10000", "--black-box-trials", "0", "--json"
    )
    assert code == 0, err
    assert "black_box" not in json.loads(out)
    (r,) = json.loads(out)["releases"]
    # The ratio is against whatever naive.py's noise claims: the canary user moves the sum by
    # 1.9999·|S|C, twice the paper's |S|C and within the true 2|S|C.
    claimed = r["claimed_sensitivity"]
    assert r["max_sensitivity_ratio"] * claimed / (2 * 0.1) == pytest.approx(2.0, abs=5e-3)
    if claimed == pytest.approx(2 * 0.1):
        assert r["sound"] is False


def test_audit_refuses_an_uncovered_algorithm_and_a_missing_file_in_one_line(tmp_path, capsys):
    path = spec_file(tmp_path, algorithm="fedavg", params={})
    code, _, err = run_cli(capsys, "audit", str(path))
    assert code == 1
    assert err == (
        "error: `algorithm` 'fedavg' is not private: it releases without noise, so there is nothing "
        "to audit.\n"
    )
    assert err.count("\n") == 1
    code, _, err = run_cli(capsys, "audit", str(tmp_path / "none.yaml"))
    assert (code, err.count("\n")) == (1, 1) and "does not exist" in err

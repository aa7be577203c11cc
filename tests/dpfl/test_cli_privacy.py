"""`dpfl privacy …` prints the reference numbers as JSON and refuses bad input in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from dpfl.privacy import calibration
from dpfl.privacy.events import SelfComposedEvent, VoteEvent
from dpfl.runner import prepare
from dpfl.spec import parse_spec
from tests.factories import run_cli


def run(capsys, *args: str) -> tuple[int, dict | str, str]:
    code, out, err = run_cli(capsys, *args)
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--noise-multiplier", "5", "--steps", "1", "--delta", "1e-5"], 0.7945),
        (
            [
                "--noise-multiplier",
                "5",
                "--steps",
                "100",
                "--sampling-rate",
                "1",
                "--delta",
                "1e-5",
                "--accountant",
                "rdp",
            ],
            10.73,
        ),
        (["--noise-multiplier", "5", "--steps", "200", "--delta", "1e-5"], 16.51),
        (["--noise-multiplier", "5", "--steps", "100", "--sampling-rate", "0.1", "--delta", "1e-5"], 0.835),
    ],
)
def test_epsilon_reference_values(capsys, args, expected):
    # reference/004_uldp_fl.md §3.4
    code, out, _ = run(capsys, "privacy", "epsilon", *args)
    assert code == 0
    assert out["epsilon"] == pytest.approx(expected, rel=1e-3)
    assert out["accountant"] == "rdp"
    assert out["delta"] == 1e-5


def test_calibrate_prints_the_noise_multiplier(capsys):
    code, out, _ = run(
        capsys,
        "privacy",
        "calibrate",
        "--epsilon",
        "3",
        "--delta",
        "1e-5",
        "--steps",
        "100",
        "--sampling-rate",
        "0.1",
        "--accountant",
        "pld",
    )
    assert code == 0
    assert out["accountant"] == "pld"
    assert out["epsilon"] <= 3
    assert out["noise_multiplier"] == pytest.approx(1.6747, rel=1e-3)  # PLD; RDP needs 1.80


def test_an_approximate_epsilon_is_printed_under_its_label(capsys):
    args = ["--noise-multiplier", "1", "--steps", "100", "--sampling-rate", "0.1", "--delta", "1e-5"]
    code, out, _ = run(capsys, "privacy", "epsilon", *args, "--accountant", "gdp")
    assert code == 0 and "epsilon" not in out
    assert out["epsilon_approximate"] == pytest.approx(6.007, rel=1e-3)  # the CLT's μ = 0.1·√(100(e−1))
    assert out["approximate"] is True
    assert out["notes"] == (
        "Poisson-sampled Gaussian accounted by the GDP central limit theorem (approximate; can "
        "underestimate ε)"
    )
    _, exact, _ = run(capsys, "privacy", "epsilon", *args[:4], "--delta", "1e-5", "--accountant", "gdp")
    # q = 1: μ = 10, in closed form
    assert exact["epsilon"] == pytest.approx(91.82, rel=1e-3) and "approximate" not in exact


@pytest.mark.parametrize(
    ("accountant", "reason"),
    [
        (
            "gdp",
            "must account every planned release exactly; 'gdp' would not: Poisson-sampled Gaussian "
            "accounted by the GDP central limit theorem (approximate; can underestimate ε). An approximate "
            "ε can neither calibrate σ nor be the headline ε; use rdp or pld",
        ),
        (
            "pate",
            "must be data-independent: 'pate' is data-dependent (its ε is computed from the noiseless vote "
            "histograms, so it is not itself differentially private); the headline ε uses a data-independent "
            "accountant such as rdp or pld, and the data-dependent bound is reported beside it",
        ),
    ],
)
def test_calibrate_refuses_an_approximate_or_data_dependent_accountant(capsys, accountant, reason):
    code, _, err = run(
        capsys, "privacy", "calibrate", "--epsilon", "3", "--delta", "1e-5", "--steps", "100",
        "--sampling-rate", "0.1", "--accountant", accountant,
    )  # fmt: skip
    assert (code, err) == (1, f"error: `--accountant` {reason}; got {accountant!r}.\n")


def test_gdp_both_directions(capsys):
    # reference/001_gdp_localnewton.md §1.4
    _, out, _ = run(capsys, "privacy", "gdp", "--mu", "1", "--delta", "1e-5")
    assert out["epsilon"] == pytest.approx(4.377, rel=1e-3)
    _, out, _ = run(capsys, "privacy", "gdp", "--epsilon", "4", "--delta", "1e-5")
    assert out["mu"] == pytest.approx(0.925, rel=2e-3)


def test_vote_digits_setting(capsys):
    # reference/003_voting_dpfl.md §3.5: the paper's conversion gives 3.72; ours is no larger
    _, out, _ = run(
        capsys, "privacy", "vote", "--sigma", "25", "--queries", "500", "--delta", "1e-3", "--level", "agent"
    )
    assert out["epsilon_classic"] == pytest.approx(3.72, abs=0.01)
    assert out["epsilon"] <= out["epsilon_classic"]
    assert out["epsilon"] == pytest.approx(3.09, abs=0.01)


def test_group_reports_both_routes(capsys):
    # reference/004_uldp_fl.md §3.4: record-level 2.849. The RDP route at k = 32 is 3267 with orders
    # where Mironov's Prop. 2 holds (the paper's 2152 uses invalid orders: test_accountants.py).
    _, out, _ = run(
        capsys,
        "privacy",
        "group",
        "--noise-multiplier",
        "5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100000",
        "--group-size",
        "32",
        "--delta",
        "1e-5",
    )
    assert out["epsilon_record_level"] == pytest.approx(2.849, rel=1e-3)
    assert out["epsilon_rdp_route"] == pytest.approx(3267.0, rel=2e-3)
    assert out["epsilon_dp_route"] == pytest.approx(854.2, rel=2e-3)
    assert out["epsilon"] == min(out["epsilon_rdp_route"], out["epsilon_dp_route"])


def test_table_output(capsys):
    code, out, _ = run(
        capsys, "privacy", "epsilon", "--noise-multiplier", "5", "--steps", "1", "--delta", "1e-5", "--table"
    )
    assert code == 0
    assert "0.794522" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["epsilon", "--noise-multiplier", "-5", "--steps", "1", "--delta", "1e-5"],
            "error: `--noise-multiplier` must be > 0; got -5.\n",
        ),
        (
            [
                "epsilon",
                "--noise-multiplier",
                "5",
                "--steps",
                "1",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "1.5",
            ],
            "error: `--sampling-rate` must be in (0, 1]; got 1.5.\n",
        ),
        (
            ["epsilon", "--noise-multiplier", "5", "--steps", "1", "--delta", "1"],
            "error: `--delta` must be in (0, 1); got 1.\n",
        ),
        (
            [
                "epsilon",
                "--noise-multiplier",
                "5",
                "--steps",
                "1",
                "--delta",
                "1e-5",
                "--accountant",
                "moments",
            ],
            "error: `--accountant` must be one of gdp, group, pate, pld, rdp; got 'moments'.\n",
        ),
        (
            ["epsilon", "--noise-multiplier", "five", "--steps", "1", "--delta", "1e-5"],
            # typer's own words: typer ≥ 0.21's, or click's under the typer < 0.21 flwr 1.42 allows
            re.compile(
                r"error: Invalid value for '--noise-multiplier': (Input should be a valid number, "
                r"unable to parse string as a number|'five' is not a valid float\.)\n"
            ),
        ),
        (["gdp", "--mu", "1"], "error: `--mu/--epsilon/--delta` give exactly two of them; got --mu.\n"),
    ],
)
def test_bad_arguments_give_one_line(capsys, args, message):
    code, _, err = run(capsys, "privacy", *args)
    assert code in (1, 2)
    assert re.fullmatch(message, err) if isinstance(message, re.Pattern) else err == message


def test_installed_command_has_no_traceback():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpfl",
            "privacy",
            "epsilon",
            "--noise-multiplier",
            "0",
            "--steps",
            "1",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr == "error: `--noise-multiplier` must be > 0; got 0.\n"


def test_vote_knn_instance_sensitivity_is_sqrt2_over_k(capsys):
    # reference/003_voting_dpfl.md §3.2: one record changes one of k neighbours, √2/k (not √(2/k) = 0.632)
    _, out, _ = run(
        capsys, "privacy", "vote", "--sigma", "2", "--queries", "100", "--delta", "1e-5",
        "--level", "instance", "--method", "knn", "--k", "5",
    )  # fmt: skip
    assert out["sensitivity"] == pytest.approx(0.2828, abs=1e-4)
    assert out["epsilon"] == pytest.approx(_vote_epsilon(noise_std=2.0, sensitivity=0.28284271, queries=100))


@pytest.mark.parametrize(
    ("method", "level"), [("ae", "agent"), ("ae", "instance"), ("knn", "agent"), ("knn", "instance")]
)
def test_vote_cli_and_the_algorithm_agree_on_the_sensitivity(capsys, method, level):
    params = {"level": level, "public_pool": 200, "queries": 50} | ({"k": 5} if method == "knn" else {})
    spec = {
        "algorithm": f"{method}_dpfl",
        "params": params,
        "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
        "model": {"name": "mlp", "hidden": [32]},
        "rounds": 1,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    algorithm = prepare(parse_spec(spec))
    args = ["--level", level, "--method", method, "--k", "5"]
    _, out, _ = run(capsys, "privacy", "vote", "--sigma", "2", "--queries", "10", "--delta", "1e-5", *args)
    assert out["sensitivity"] == algorithm.sensitivity


def _vote_epsilon(*, noise_std: float, sensitivity: float, queries: int) -> float:
    event = SelfComposedEvent(VoteEvent(noise_std=noise_std, sensitivity=sensitivity), queries)
    return calibration.epsilon(event, delta=1e-5)

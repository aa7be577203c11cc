"""`dpfl reproduce --server`: the sweeps run on a real `dpfl up` give the numbers of the same runs
made here, and an unreachable server is one line."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import pytest

from dpfl import runner
from dpfl.spec import parse_spec
from tests.dpfl.test_reproduce import BLOCK, SPEC, direct_runs, read_csv, write_config
from tests.factories import run_cli
from tests.server import dpfl_up, free_port


@pytest.fixture
def server(tmp_path) -> Iterator[str]:
    """`dpfl up` (API and one worker, embedded SQLite and broker) in its own DPFL_HOME; yields its URL."""
    home = tmp_path / "home"
    home.mkdir()
    with dpfl_up(home, timeout_s=60) as url:
        yield url


@pytest.mark.service
def test_reproduce_on_a_server_gives_the_same_numbers(capsys, tmp_path, server):
    block = BLOCK | {
        "grid": {"algorithm": ["isrl_mbsgd"], "privacy.epsilon": [4.0]},
        "seeds": 1,
        "claims": [],
    }
    configs = write_config(tmp_path / "configs", block=block)
    code, _, err = run_cli(
        capsys,
        "reproduce",
        "isrl",
        "--server",
        server,
        "--configs",
        str(configs),
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0, err
    (sweep,) = httpx.get(f"{server}/api/sweeps").json()["items"]
    assert (sweep["name"], sweep["num_runs"], sweep["counts"]["succeeded"]) == (
        "reproduce isrl: isrl_tiny",
        1,
        1,
    )
    assert f"{server}/#/compare?sweep={sweep['id']}" in err
    (row,) = read_csv(tmp_path / "o" / "summary.csv")
    (result,) = direct_runs("isrl_mbsgd", 4.0, seeds=(0,))  # the same run, made here
    assert (row["algorithm"], float(row["x"]), row["n"]) == ("isrl_mbsgd", 4.0, "1")
    assert float(row["accuracy_mean"]) == pytest.approx(result.final.accuracy, abs=1e-6)
    assert float(row["loss_mean"]) == pytest.approx(result.final.loss, rel=1e-5)
    assert float(row["epsilon_mean"]) == pytest.approx(result.epsilon, rel=1e-9)
    assert math.isclose(float(row["target_epsilon"]), 4.0)
    assert sweep["id"] in (tmp_path / "o" / "report.html").read_text()
    # The paper's calibration is accounted by the server's projection: the same ε as a run here.
    paper = runner.run(
        parse_spec(SPEC | {"privacy": SPEC["privacy"] | {"epsilon": 4.0, "calibration": "paper"}})
    )
    assert (
        f"| isrl_tiny | isrl_mbsgd | rdp, 1e-5 | **{paper.epsilon:.4g}** |"
        in (tmp_path / "o" / "reproduction.md").read_text()
    )


def test_unreachable_server_is_one_line(capsys, tmp_path):
    configs = write_config(tmp_path / "configs")
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run_cli(capsys, "reproduce", "isrl", "--server", url, "--configs", str(configs))
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"error: cannot reach the server at {url} (") and "start one with `dpfl up`" in err

"""Plain functions that build test inputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dpfl.cli import main
from dpfl.spec import RunSpec, parse_spec


def data_dir() -> Path:
    """Returns DPFL_DATA_DIR (the real datasets), skipping the test when it is not set."""
    raw = os.environ.get("DPFL_DATA_DIR")
    if not raw or not Path(raw).is_dir():
        pytest.skip("DPFL_DATA_DIR is not set to the shared datasets folder (make test sets it)")
    return Path(raw)


def digits_spec(**overrides: Any) -> RunSpec:
    """Returns a small run on the bundled digits dataset; `overrides` replace top-level fields."""
    base: dict[str, Any] = {
        "algorithm": "fedavg",
        "params": {"lr": 0.1, "local_steps": 5, "batch_size": 32},
        "dataset": {"name": "digits", "silos": 10},
        "model": {"name": "mlp", "hidden": [64]},
        "rounds": 20,
        "eval_every": 5,
        "seed": 0,
    }
    return parse_spec(base | overrides)


def isrl_digits_spec(**overrides: Any) -> RunSpec:
    """Returns an ISRL-DP MB-SGD run on digits at ε = 3."""
    return digits_spec(
        **(
            {
                "algorithm": "isrl_mbsgd",
                "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
                "rounds": 30,
                "eval_every": 10,
                "privacy": {"epsilon": 3.0, "delta": 1e-5},
            }
            | overrides
        )
    )


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """Returns (exit code, stdout, stderr) of `dpfl ARGS` run in this process."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def service_spec(**overrides: Any) -> dict[str, Any]:
    """Returns a small ISRL-DP run on digits (4 silos, 3 rounds, ε = 2) as the JSON the API takes."""
    return {
        "algorithm": "isrl_mbsgd",
        "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
        "dataset": {"name": "digits", "silos": 4},
        "model": {"name": "mlp", "hidden": [32]},
        "rounds": 3,
        "privacy": {"epsilon": 2.0, "delta": 1e-5},
    } | overrides

"""Where the CLI finds data: the environment, read here and nowhere below."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEVICE_HELP", "cache_dir", "data_dirs"]

DEVICE_HELP = (
    "Where to compute: auto (CUDA when present, else the CPU), cpu, cuda or cuda:N [env: DPFL_DEVICE]."
)


def data_dirs() -> list[Path]:
    """Returns the folders searched for dataset files: `DPFL_DATA_DIR` (os.pathsep-separated)."""
    raw = os.environ.get("DPFL_DATA_DIR", "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p]


def cache_dir() -> Path:
    """Returns where downloaded datasets are kept: `$DPFL_HOME/datasets` (default ~/.dpfl)."""
    return Path(os.environ.get("DPFL_HOME", "~/.dpfl")).expanduser() / "datasets"

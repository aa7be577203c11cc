"""Fixtures for the data tests: the real data folder and datasets parsed once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpfl.data import Dataset, load_dataset


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder of real dataset files (shared/data), from ``DPFL_DATA_DIR``."""
    value = os.environ.get("DPFL_DATA_DIR")
    if not value:
        pytest.skip(
            "DPFL_DATA_DIR is not set: run with DPFL_DATA_DIR=<repo>/../shared/data "
            "(the offline copies of MNIST, Heart Disease and Adult; `make test` sets it)"
        )
    return Path(value)


@pytest.fixture(scope="session")
def mnist(data_dir: Path) -> Dataset:
    """MNIST, parsed once per session (about a second)."""
    return load_dataset("mnist", search_dirs=[data_dir])


@pytest.fixture(scope="session")
def heart(data_dir: Path) -> Dataset:
    """Fed-Heart-Disease with the default per-hospital standardisation."""
    return load_dataset("heart", search_dirs=[data_dir])


@pytest.fixture(scope="session")
def adult_onehot(data_dir: Path) -> Dataset:
    """Adult in the one-hot encoding."""
    return load_dataset("adult", search_dirs=[data_dir], encoding="onehot")


@pytest.fixture(scope="session")
def adult_a9a(data_dir: Path) -> Dataset:
    """Adult in the LIBSVM a9a encoding."""
    return load_dataset("adult", search_dirs=[data_dir], encoding="a9a")

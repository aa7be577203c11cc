"""Fixtures of the dpfl tests that several files share."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dpfl.data.files import file_digest
from dpfl.data.loaders import creditcard
from tests.dpfl.data.test_creditcard import write_creditcard


@pytest.fixture
def card_data(tmp_path, monkeypatch) -> Path:
    """A data folder holding a generated creditcard.csv of 400 rows (40 frauds) that the loader takes
    as the official one: its checksum is the generated file's."""
    folder = tmp_path / "data"
    (folder / "creditcard").mkdir(parents=True)
    path = folder / "creditcard" / "creditcard.csv"
    write_creditcard(path)
    spec = dataclasses.replace(creditcard.CREDITCARD_FILES[0], sha256=file_digest(path, "sha256"))
    monkeypatch.setattr(creditcard, "CREDITCARD_FILES", (spec,))
    return folder

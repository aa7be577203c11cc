"""Prepared datasets are remembered in the process and, transformed, on disk, under a key that
changes with everything the result depends on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import apply_features, load_dataset
from dpfl.data.prepared import clear_prepared, load_prepared
from dpfl.errors import SpecError, UnknownNameError


@pytest.fixture(autouse=True)
def fresh():
    clear_prepared()
    yield
    clear_prepared()


def _same(a, b) -> None:
    for field in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert (a.num_classes, a.name, a.feature_names, a.fitted) == (
        b.num_classes,
        b.name,
        b.feature_names,
        b.fitted,
    )


def test_a_transformed_dataset_is_the_same_from_memory_and_from_disk(tmp_path: Path):
    direct = apply_features(load_dataset("digits"), {"pca": 10})
    first = load_prepared("digits", options={}, features={"pca": 10}, cache_dir=tmp_path)
    _same(first, direct)
    assert load_prepared("digits", options={}, features={"pca": 10}, cache_dir=tmp_path) is first
    stored = list((tmp_path / "prepared").glob("*.npz"))
    assert len(stored) == 1
    clear_prepared()
    from_disk = load_prepared("digits", options={}, features={"pca": 10}, cache_dir=tmp_path)
    assert from_disk is not first
    _same(from_disk, direct)
    # another transform is another entry; an untransformed dataset is not written to disk
    load_prepared("digits", options={}, features={"pca": 5}, cache_dir=tmp_path)
    load_prepared("digits", options={}, features=None, cache_dir=tmp_path)
    assert len(list((tmp_path / "prepared").glob("*.npz"))) == 2


def test_an_unreadable_entry_is_rebuilt(tmp_path: Path):
    load_prepared("digits", options={}, features={"pca": 4}, cache_dir=tmp_path)
    (entry,) = (tmp_path / "prepared").glob("*.npz")
    entry.write_bytes(b"not an npz")
    clear_prepared()
    again = load_prepared("digits", options={}, features={"pca": 4}, cache_dir=tmp_path)
    _same(again, apply_features(load_dataset("digits"), {"pca": 4}))


def test_a_changed_user_file_is_read_again(tmp_path: Path):
    path = tmp_path / "table.csv"
    path.write_text(
        "height,outcome\n" + "".join(f"{150 + i},{'yes' if i % 3 else 'no'}\n" for i in range(40))
    )
    options = {"path": str(path), "label": "outcome"}
    first = load_prepared("csv", options=options, features=None)
    assert load_prepared("csv", options=options, features=None) is first
    path.write_text(
        "height,outcome\n" + "".join(f"{100 + i},{'yes' if i % 2 else 'no'}\n" for i in range(60))
    )
    os.utime(path, ns=(1, 1))  # a new size and time, as an edited file has
    second = load_prepared("csv", options=options, features=None)
    assert second.num_train + second.num_test == 60 != first.num_train + first.num_test


def test_bad_names_and_options_are_refused_as_without_a_cache(tmp_path: Path):
    with pytest.raises(UnknownNameError):
        load_prepared("digitz", options={}, features=None, cache_dir=tmp_path)
    with pytest.raises(SpecError, match=r"dataset\.colour"):
        load_prepared("digits", options={"colour": 1}, features=None, cache_dir=tmp_path)
    with pytest.raises(UnknownNameError):
        load_prepared("digits", options={}, features={"tsne": 2}, cache_dir=tmp_path)
    assert not (tmp_path / "prepared").exists() or not list((tmp_path / "prepared").iterdir())

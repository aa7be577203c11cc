"""USPS from bzip2 svmlight files generated here in LIBSVM's exact format (no network): reading
(label ℓ is the digit ℓ − 1, values [-1, 1] → [0, 1], a left-out index is 0), refusing what is not
such a file, and the checksum."""

from __future__ import annotations

import bz2
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import load_dataset
from dpfl.data.files import file_digest
from dpfl.data.loaders import usps
from dpfl.errors import DatasetUnavailable


def write_usps(path: Path, *, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Writes a LIBSVM USPS file (`<label 1..10> 1:<v> ... 256:<v>`, v in [-1, 1], bzip2); returns
    (values [count, 256], labels 1..10) as written."""
    rng = np.random.default_rng(seed)
    values = np.round(rng.uniform(-1, 1, (count, 256)), 6)
    labels = rng.integers(1, 11, count)
    labels[0] = 10  # the digit 9
    lines = [
        f"{label} " + " ".join(f"{i + 1}:{v:.6f}" for i, v in enumerate(row)) + "\n"
        for label, row in zip(labels, values, strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bz2.compress("".join(lines).encode("ascii")))
    return values, labels


def test_a_file_is_read_as_digits_and_pixels_in_0_1(tmp_path):
    values, labels = write_usps(tmp_path / "usps.bz2", count=6)
    pixels, digits = usps.read_usps(tmp_path / "usps.bz2")
    assert pixels.shape == (6, 256) and pixels.dtype == np.float32 and digits.dtype == np.int64
    np.testing.assert_allclose(pixels, (values + 1) / 2, atol=1e-7)
    assert digits.tolist() == (labels - 1).tolist() and digits[0] == 9


def test_a_left_out_index_is_zero_as_svmlight_defines(tmp_path):
    path = tmp_path / "sparse.bz2"
    path.write_bytes(bz2.compress(b"1 2:0.5 256:-0.5\n3\n"))
    pixels, digits = usps.read_usps(path)
    expected = np.full((2, 256), 0.5, dtype=np.float32)  # a value of 0 is grey level 0.5
    expected[0, 1], expected[0, 255] = 0.75, 0.25
    np.testing.assert_array_equal(pixels, expected)
    assert digits.tolist() == [0, 2]


@pytest.fixture
def generated(tmp_path, monkeypatch) -> Path:
    """A folder holding generated train (9) and test (4) files the loader takes as the official
    ones: their md5s are the generated files'."""
    folder = tmp_path / "data"
    specs = []
    for spec, count in zip(usps.USPS_FILES, (9, 4), strict=True):
        write_usps(folder / spec.relpath, count=count, seed=count)
        specs.append(dataclasses.replace(spec, md5=file_digest(folder / spec.relpath, "md5")))
    monkeypatch.setattr(usps, "USPS_FILES", tuple(specs))
    return folder


def test_the_loader_gives_libsvms_split(generated):
    data = load_dataset("usps", search_dirs=[generated])
    values, labels = write_usps(generated / "again.bz2", count=9, seed=9)  # the train file's again
    assert (data.num_train, data.num_test, data.num_features, data.num_classes) == (9, 4, 256, 10)
    np.testing.assert_allclose(data.x_train, (values + 1) / 2, atol=1e-7)
    assert data.y_train.tolist() == (labels - 1).tolist()


def test_a_file_that_is_not_the_official_one_is_refused_naming_both_md5s(tmp_path):
    for spec in usps.USPS_FILES:
        write_usps(tmp_path / spec.relpath, count=2)
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("usps", search_dirs=[tmp_path])
    found = file_digest(tmp_path / "usps" / "usps.bz2", "md5")
    assert f"its md5 is {found}, expected ec16c51db3855ca6c91edd34d0e9b197" in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"1 1:0.5\n", r"is not LIBSVM's bzip2 USPS file: "),  # not compressed
        (bz2.compress(b"1 1:0.5\n2 1:0.5 2\n"), r"line 2, is not an svmlight row: "),
        (bz2.compress(b"one 1:0.5\n"), r"line 1, is not an svmlight row: "),
        (bz2.compress(b"1 1:nan\n"), r"line 1, is not an svmlight row: .*finite"),
        (bz2.compress(b"1 1:0.5\n0 1:0.5\n"), r"line 2: the label must be 1\.\.10; got 0"),
        (bz2.compress(b"11 1:0.5\n"), r"line 1: the label must be 1\.\.10; got 11"),
        (bz2.compress(b"1 257:0.5\n"), r"line 1: pixel indices must be integers 1\.\.256"),
        (bz2.compress(b"1 0:0.5\n"), r"line 1: pixel indices must be integers 1\.\.256"),
        (bz2.compress(b"1 4:1.5\n"), r"line 1: pixel values must lie in \[-1, 1\]"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_line(tmp_path, raw, message):
    path = tmp_path / "bad.bz2"
    path.write_bytes(raw)
    with pytest.raises(DatasetUnavailable, match=message):
        usps.read_usps(path)

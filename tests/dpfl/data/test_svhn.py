"""SVHN from .mat files generated here in its exact format (no network): reading (label 10 is the
digit 0, channels first), `extra` as more training data, refusing what is not SVHN's, and the
checksum."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from dpfl.data import load_dataset
from dpfl.data.files import file_digest
from dpfl.data.loaders import svhn
from dpfl.errors import DatasetUnavailable, SpecError


def write_mat(path: Path, *, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Writes an SVHN .mat file as the official ones are laid out (`X` uint8 [32, 32, 3, N], `y`
    [N, 1] in 1..10); returns (X, y) as written."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (32, 32, 3, count), dtype=np.uint8)
    y = rng.integers(1, 11, (count, 1)).astype(np.uint8)
    y[0, 0] = 10  # at least one 0
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"X": x, "y": y})
    return x, y


def test_a_file_is_read_channels_first_with_10_as_the_digit_0(tmp_path):
    x, y = write_mat(tmp_path / "train_32x32.mat", count=7)
    images, labels = svhn.read_svhn(tmp_path / "train_32x32.mat")
    assert images.shape == (7, 3, 32, 32) and images.dtype == np.uint8
    np.testing.assert_array_equal(images[4, 1], x[:, :, 1, 4])  # image 4's green plane
    assert labels.tolist() == [int(v) % 10 for v in y[:, 0]] and labels[0] == 0
    assert labels.dtype == np.int64 and set(labels.tolist()) <= set(range(10))


@pytest.fixture
def generated(tmp_path, monkeypatch) -> Path:
    """A folder holding generated train (12), test (5) and extra (8) files that the loader takes
    as the official ones: their checksums are the generated files'."""
    folder = tmp_path / "data"
    specs = []
    for spec, count in zip((*svhn.SVHN_FILES, svhn.SVHN_EXTRA), (12, 5, 8), strict=True):
        path = folder / spec.relpath
        write_mat(path, count=count, seed=count)
        specs.append(dataclasses.replace(spec, sha256=file_digest(path, "sha256")))
    monkeypatch.setattr(svhn, "SVHN_FILES", tuple(specs[:2]))
    monkeypatch.setattr(svhn, "SVHN_EXTRA", specs[2])
    return folder


def test_the_loader_gives_the_official_split_in_0_1_and_extra_on_request(generated):
    data = load_dataset("svhn", search_dirs=[generated])
    x, y = write_mat(generated / "again.mat", count=12, seed=12)  # the train file's arrays again
    assert (data.num_train, data.num_test, data.num_features) == (12, 5, 3072)
    np.testing.assert_array_equal(
        data.x_train[3], x[:, :, :, 3].transpose(2, 0, 1).reshape(-1) / np.float32(255)
    )
    assert data.y_train.tolist() == [int(v) % 10 for v in y[:, 0]]
    assert data.x_train.dtype == np.float32 and data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0
    more = load_dataset("svhn", search_dirs=[generated], extra=True)
    assert more.num_train == 20 and more.num_test == 5
    np.testing.assert_array_equal(more.x_train[:12], data.x_train)
    with pytest.raises(SpecError) as caught:
        load_dataset("svhn", search_dirs=[generated], extra="yes")
    assert (caught.value.field, caught.value.reason) == ("dataset.extra", "must be true or false; got 'yes'.")


def test_a_file_that_is_not_the_official_one_is_refused_naming_both_digests(tmp_path):
    for spec in svhn.SVHN_FILES:
        write_mat(tmp_path / spec.relpath, count=3)
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("svhn", search_dirs=[tmp_path])
    found = file_digest(tmp_path / "svhn" / "train_32x32.mat", "sha256")
    assert f"its sha256 is {found}, expected {svhn.SVHN_FILES[0].sha256}" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a MATLAB file at all", r"is not an SVHN \.mat file: "),
        ({"X": np.zeros((32, 32, 3, 2), np.uint8)}, r"it lacks `X` or `y` \(variables: X\)"),
        (
            {"X": np.zeros((28, 28, 2), np.uint8), "y": np.ones((2, 1))},
            r"`X` must be uint8 \[32, 32, 3, N\]; got uint8 \(28, 28, 2\)",
        ),
        ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((3, 1))}, r"one label per image \(2\)"),
        (
            {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[0], [11]])},
            r"labels must be 1\.\.10 \(10 is the digit 0\); got values in \[0, 11\]",
        ),
    ],
)
def test_a_malformed_file_is_refused_saying_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.mat"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        scipy.io.savemat(path, content)
    with pytest.raises(DatasetUnavailable, match=message):
        svhn.read_svhn(path)

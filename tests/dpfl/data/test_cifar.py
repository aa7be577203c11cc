"""CIFAR-10 from archives generated here in its exact format (no network): reading, refusing what
is not a batch (and running no code a pickle names), the checksum, and a run of the ISRL-DP
paper's CIFAR-10 setting (10 one-class silos, its CNN) on generated files."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.data import load_dataset
from dpfl.data.files import file_digest
from dpfl.data.loaders import cifar
from dpfl.errors import DatasetUnavailable
from dpfl.spec import parse_spec


def write_archive(
    path: Path, *, per_batch: int = 30, test: int = 40, seed: int = 0, extra: dict | None = None
) -> dict:
    """Writes a cifar-10-python.tar.gz as the official one is laid out (five training batches and a
    test batch, each a protocol-2 pickle of a dict with `data` uint8 [N, 3072] and `labels`);
    returns the arrays written. `extra` replaces members' bytes."""
    rng = np.random.default_rng(seed)
    written = {}
    with tarfile.open(path, "w:gz") as archive:
        for name, rows in [*((f"data_batch_{i}", per_batch) for i in range(1, 6)), ("test_batch", test)]:
            entry = {
                "batch_label": f"{name} of 6",
                "labels": [int(v) for v in rng.integers(0, 10, rows)],
                "data": rng.integers(0, 256, (rows, 3072), dtype=np.uint8),
                "filenames": [f"{name}_{i}.png" for i in range(rows)],
            }
            written[name] = entry
            raw = (extra or {}).get(name) or pickle.dumps(entry, protocol=2)
            member = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            member.size = len(raw)
            archive.addfile(member, io.BytesIO(raw))
    return written


def test_the_archive_is_read_into_the_official_split(tmp_path):
    written = write_archive(tmp_path / "cifar-10-python.tar.gz")
    x_train, y_train, x_test, y_test = cifar.read_cifar10(tmp_path / "cifar-10-python.tar.gz")
    assert x_train.shape == (150, 3072) and x_test.shape == (40, 3072) and x_train.dtype == np.uint8
    np.testing.assert_array_equal(x_train[:30], written["data_batch_1"]["data"])
    np.testing.assert_array_equal(x_train[120:], written["data_batch_5"]["data"])
    assert y_train[30:60].tolist() == written["data_batch_2"]["labels"]
    assert y_test.tolist() == written["test_batch"]["labels"]


class _RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def test_a_batch_that_names_a_function_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    evil = pickle.dumps({"data": _RunsCode(marker), "labels": []}, protocol=2)
    write_archive(tmp_path / "a.tar.gz", extra={"data_batch_3": evil})
    with pytest.raises(
        DatasetUnavailable, match=r"is not CIFAR-10's python archive: a CIFAR-10 batch calls no posix.mkdir"
    ):
        cifar.read_cifar10(tmp_path / "a.tar.gz")
    assert not marker.exists()


def test_an_archive_without_a_batch_is_refused_naming_it(tmp_path):
    path = tmp_path / "short.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        member = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        raw = pickle.dumps({"data": np.zeros((1, 3072), np.uint8), "labels": [0]}, protocol=2)
        member.size = len(raw)
        archive.addfile(member, io.BytesIO(raw))
    with pytest.raises(DatasetUnavailable, match=r"is not CIFAR-10's python archive: .*data_batch_2"):
        cifar.read_cifar10(path)


def test_a_file_that_is_not_the_official_archive_is_refused_by_its_sha256(tmp_path):
    (tmp_path / "cifar10").mkdir()
    write_archive(tmp_path / "cifar10" / "cifar-10-python.tar.gz")
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("cifar10", search_dirs=[tmp_path])
    expected = cifar.CIFAR10_FILES[0].sha256
    assert f"its sha256 is {file_digest(tmp_path / 'cifar10' / 'cifar-10-python.tar.gz', 'sha256')}" in str(
        caught.value
    )
    assert f"expected {expected}" in str(caught.value)


@pytest.fixture
def generated(tmp_path, monkeypatch) -> Path:
    """A folder holding a generated archive of 1,000 training images (100 per class in the test's
    silos) that the loader takes as the official one: its checksum is the generated file's."""
    folder = tmp_path / "data"
    (folder / "cifar10").mkdir(parents=True)
    path = folder / "cifar10" / "cifar-10-python.tar.gz"
    write_archive(path, per_batch=200, test=100)
    spec = dataclasses.replace(cifar.CIFAR10_FILES[0], sha256=file_digest(path, "sha256"))
    monkeypatch.setattr(cifar, "CIFAR10_FILES", (spec,))
    return folder


def test_a_run_of_the_papers_cifar10_setting_on_generated_files(generated):
    # reference/000_isrl_dp.md §6.3: 10 silos of one class each, the tutorial CNN; 2 rounds here
    spec = parse_spec(
        {
            "algorithm": "isrl_mbsgd",
            "params": {"lr": 0.05, "batch_size": 32, "clip": 1.0},
            "dataset": {
                "name": "cifar10",
                "silos": 10,
                "partition": {"kind": "shards", "labels_per_silo": 1},
            },
            "model": {"name": "cifar_cnn"},
            "rounds": 2,
            "privacy": {"epsilon": 3.0, "delta": 1e-6},
            "seed": 1,
        }
    )
    result = runner.run(spec, data_dirs=[generated], device="cpu")
    histogram = np.asarray(result.label_histogram)
    assert histogram.shape == (10, 10) and ((histogram > 0).sum(axis=1) == 1).all()  # one class each
    assert result.epsilon is not None and 2.9 < result.epsilon <= 3.0 + 1e-9
    assert result.final.accuracy is not None and 0.0 <= result.final.accuracy <= 1.0
    assert result.final_params.numel() == 62_006  # the paper's CNN on 3×32×32

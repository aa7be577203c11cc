"""The voting paper's Digits task (SVHN, MNIST → USPS) from files generated here in each source's
exact format: one grey 32×32 input for all three, an agent per natural silo, USPS as the test split
(and so the server's public pool), and an AE-DPFL run on it within its ε."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.data import load_dataset
from dpfl.data.files import file_digest
from dpfl.data.loaders import digit_domains
from dpfl.errors import SpecError
from dpfl.spec import parse_spec
from tests.dpfl.data.test_svhn import write_mat
from tests.dpfl.data.test_usps import write_usps
from tests.factories import data_dir, run_cli

SOURCES = {"svhn_train": 30, "svhn_extra": 20, "mnist": 40, "usps_train": 40, "usps_test": 20}


def write_idx(path: Path, array: np.ndarray, magic: int) -> None:
    """Writes a gzipped IDX file (a big-endian magic, one big-endian size per dimension, the bytes)."""
    header = np.array([magic, *array.shape], dtype=">u4").tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


@pytest.fixture
def generated(tmp_path, monkeypatch) -> tuple[Path, dict]:
    """A folder holding every file of the task, generated, that the loader takes as the official
    ones (their checksums are the generated files'); and the arrays written."""
    folder, rng = tmp_path / "data", np.random.default_rng(5)
    written = {
        "svhn_train": write_mat(folder / "svhn/train_32x32.mat", count=SOURCES["svhn_train"], seed=1),
        "svhn_extra": write_mat(folder / "svhn/extra_32x32.mat", count=SOURCES["svhn_extra"], seed=2),
        "mnist": (rng.integers(0, 256, (40, 28, 28)), rng.integers(0, 10, 40)),
        "usps_train": write_usps(folder / "usps/usps.bz2", count=SOURCES["usps_train"], seed=3),
        "usps_test": write_usps(folder / "usps/usps.t.bz2", count=SOURCES["usps_test"], seed=4),
    }
    write_idx(folder / "mnist/train-images-idx3-ubyte.gz", written["mnist"][0], 0x00000803)
    write_idx(folder / "mnist/train-labels-idx1-ubyte.gz", written["mnist"][1], 0x00000801)
    specs = tuple(
        dataclasses.replace(spec, md5=file_digest(folder / spec.relpath, "md5"), sha256="")
        for spec in digit_domains.DIGIT_DOMAINS_FILES
    )
    monkeypatch.setattr(digit_domains, "DIGIT_DOMAINS_FILES", specs)
    return folder, written


SMALL = {"svhn_agents": 3, "svhn_records": 12, "mnist_agents": 2, "mnist_records": 15}


def test_every_source_becomes_grey_32x32_and_each_agent_a_silo(generated):
    folder, written = generated
    data = load_dataset("digit_domains", search_dirs=[folder], **SMALL)
    assert (data.num_train, data.num_test, data.num_features, data.num_silos) == (66, 60, 1024, 5)
    assert data.silo_train.tolist() == [0] * 12 + [1] * 12 + [2] * 12 + [3] * 15 + [4] * 15
    assert data.silo_names == ("svhn 1", "svhn 2", "svhn 3", "mnist 1", "mnist 2")

    # SVHN (train, then extra): luminance of each image, label 10 as 0, 36 distinct records
    x = np.concatenate([written["svhn_train"][0], written["svhn_extra"][0]], axis=3).astype(np.float32)
    grey = (0.299 * x[:, :, 0] + 0.587 * x[:, :, 1] + 0.114 * x[:, :, 2]) / 255
    grey = grey.transpose(2, 0, 1).reshape(50, -1)
    labels = np.concatenate([written["svhn_train"][1][:, 0], written["svhn_extra"][1][:, 0]]) % 10
    match = [int(np.abs(grey - row).max(axis=1).argmin()) for row in data.x_train[:36]]
    np.testing.assert_allclose(grey[match], data.x_train[:36], atol=1e-6)
    assert len(set(match)) == 36 and data.y_train[:36].tolist() == labels[match].tolist()

    # MNIST: a 2-pixel black border around the 28×28 image
    images, digits = written["mnist"]
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2))).reshape(40, -1) / 255
    match = [int(np.abs(padded - row).max(axis=1).argmin()) for row in data.x_train[36:]]
    np.testing.assert_allclose(padded[match], data.x_train[36:], atol=1e-6)
    assert len(set(match)) == 30 and data.y_train[36:].tolist() == digits[match].tolist()

    # USPS, all of it (train file then test file): each pixel a 2×2 block, in [0, 1]
    values = np.concatenate([written["usps_train"][0], written["usps_test"][0]])
    doubled = ((values + 1) / 2).reshape(60, 16, 16).repeat(2, axis=1).repeat(2, axis=2).reshape(60, -1)
    np.testing.assert_allclose(data.x_test, doubled, atol=1e-6)
    expected = np.concatenate([written["usps_train"][1], written["usps_test"][1]]) - 1
    assert data.y_test.tolist() == expected.tolist()


def test_agents_needing_more_records_than_a_source_has_are_refused_naming_the_option(generated):
    folder, _ = generated
    with pytest.raises(SpecError) as caught:
        load_dataset("digit_domains", search_dirs=[folder], **SMALL | {"svhn_records": 20})
    assert (caught.value.field, caught.value.reason) == (
        "dataset.svhn_records",
        "must be ≤ 16 for 3 agents: the source has 50 training records; got 20.",
    )
    with pytest.raises(SpecError) as caught:  # without `extra`, SVHN has only its 30 train records
        load_dataset("digit_domains", search_dirs=[folder], **SMALL | {"svhn_extra": False})
    assert caught.value.reason == "must be ≤ 10 for 3 agents: the source has 30 training records; got 12."
    with pytest.raises(SpecError) as caught:
        load_dataset("digit_domains", search_dirs=[folder], **SMALL | {"mnist_agents": 0})
    assert (caught.value.field, caught.value.reason) == (
        "dataset.mnist_agents",
        "must be an integer ≥ 1; got 0.",
    )


def test_an_ae_dpfl_run_with_usps_as_the_public_pool_stays_within_its_epsilon(generated):
    # the paper's Digits setting in miniature: USPS records are the public pool, the rest the test set
    folder, _ = generated
    spec = parse_spec(
        {
            "algorithm": "ae_dpfl",
            "params": {"public_pool": 30, "queries": 20, "local_epochs": 2, "student_epochs": 3},
            "dataset": {
                "name": "digit_domains",
                "silos": 5,
                "partition": {"kind": "natural"},
                "options": SMALL,
            },
            "model": {"name": "mlp", "hidden": [16]},
            "rounds": 2,
            "privacy": {"epsilon": 3.6, "delta": 1e-3},
            "seed": 1,
        }
    )
    result = runner.run(spec, data_dirs=[folder], device="cpu")
    assert result.epsilon is not None and 3.5 < result.epsilon <= 3.6 + 1e-9
    assert np.asarray(result.label_histogram).sum(axis=1).tolist() == [12, 12, 12, 15, 15]
    assert result.final.accuracy is not None and 0.0 <= result.final.accuracy <= 1.0
    assert sum(result.test_label_histogram) == 30  # 60 USPS records less the pool's 30
    assert result.final.metrics["queries_answered"] == 20
    assert result.final_params.numel() == 1024 * 16 + 16 + 16 * 10 + 10  # grey 32×32 in


def test_the_papers_digits_setting_without_its_files_names_each_folders_missing_files(
    capsys, monkeypatch, tmp_path
):
    # the shared folder's MNIST is found (its training files are this task's); SVHN and USPS are not
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mnist").symlink_to(data_dir() / "mnist")
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    code, out, err = run_cli(
        capsys, "reproduce", "voting", "--setting", "digits", "--out", str(tmp_path / "o")
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: dataset 'digit_domains' not found: put train_32x32.mat and extra_32x32.mat in "
        "$DPFL_DATA_DIR/svhn/, usps.bz2 and usps.t.bz2 in $DPFL_DATA_DIR/usps/ "
        f"(now {tmp_path / 'data'}) or fetch it with `dpfl run SPEC --download`\n"
    )
    assert not (tmp_path / "o").exists()

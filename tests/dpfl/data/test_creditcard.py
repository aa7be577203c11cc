"""Creditcard from CSV files card_data here in the exact format of Kaggle's creditcard.csv (no
network): reading, the paper's preprocessing, refusing what is not the file, the checksum, the
paper's setting left out without its file, and a ULDP-AVG run on card_data files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfl import runner
from dpfl.data import load_dataset
from dpfl.data.files import file_digest
from dpfl.data.loaders import creditcard
from dpfl.data.preprocessing import stratified_split
from dpfl.errors import DatasetUnavailable, SpecError
from dpfl.spec import parse_spec
from tests.factories import run_cli

HEADER = ",".join(f'"{name}"' for name in creditcard.CREDITCARD_HEADER)


def write_creditcard(path: Path, *, rows: int = 400, frauds: int = 40, seed: int = 0) -> tuple:
    """Writes a creditcard.csv as Kaggle's is laid out (every header name quoted, numbers bare, the
    class quoted as "0" or "1", LF line ends); returns the (features, labels) written."""
    rng = np.random.default_rng(seed)
    time = np.sort(rng.integers(0, 172_792, rows)).astype(np.float64)  # seconds, as whole numbers
    amount = np.round(rng.exponential(80.0, rows), 2)
    features = np.column_stack([time, rng.normal(size=(rows, 28)), amount])
    labels = np.zeros(rows, dtype=np.int64)
    labels[rng.choice(rows, frauds, replace=False)] = 1
    lines = [HEADER] + [
        ",".join([f"{row[0]:g}", *(repr(float(v)) for v in row[1:])]) + f',"{label}"'
        for row, label in zip(features, labels, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return features, labels


def test_the_csv_is_read_exactly_in_file_order(tmp_path):
    features, labels = write_creditcard(tmp_path / "creditcard.csv", rows=50, frauds=5)
    x, y = creditcard.read_creditcard(tmp_path / "creditcard.csv")
    np.testing.assert_array_equal(x, features)
    np.testing.assert_array_equal(y, labels)
    assert x.shape == (50, 30) and y.dtype == np.int64 and y.sum() == 5


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('"Time","V1","Class"', r"it has a header of 3 columns; expected the 31 columns Time, V1..V28"),
        ("1,2,3", r"line 3 has 3 fields, expected 31"),
        (",".join(["0"] * 5 + ["x"] + ["0"] * 24) + ',"0"', r"line 3 has a V5 that is not a number"),
        (",".join(["0"] * 30) + ',"2"', r"line 3 has Class 2; allowed: 0 or 1"),
        (",".join(["0"] * 3 + ["nan"] + ["0"] * 26) + ',"0"', r"line 3 holds a NaN or infinite value"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_file_and_the_fault(tmp_path, line, message):
    path = tmp_path / "creditcard.csv"
    good = ",".join(["0"] * 30) + ',"1"'
    path.write_text(f"{line}\n" if line.startswith('"Time"') else f"{HEADER}\n{good}\n{line}\n")
    with pytest.raises(DatasetUnavailable, match=rf"^{path} is not the Creditcard CSV: {message}"):
        creditcard.read_creditcard(path)


def test_a_header_without_rows_is_refused(tmp_path):
    (tmp_path / "creditcard.csv").write_text(HEADER + "\n")
    with pytest.raises(DatasetUnavailable, match="it has a header but no rows"):
        creditcard.read_creditcard(tmp_path / "creditcard.csv")


def test_a_file_that_is_not_the_official_csv_is_refused_naming_both_digests(tmp_path):
    (tmp_path / "creditcard").mkdir()
    path = tmp_path / "creditcard" / "creditcard.csv"
    write_creditcard(path)
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("creditcard", search_dirs=[tmp_path])
    assert f"its sha256 is {file_digest(path, 'sha256')}" in str(caught.value)
    # the SHA-256 several independent projects pin for Kaggle's file (dpfl/data/loaders/creditcard.py)
    assert "expected 76274b691b16a6c49d3f159c883398e03ccd6d1ee12d9d8ee38f4b4b98551a89" in str(caught.value)


def test_a_missing_file_says_where_to_put_it(tmp_path):
    with pytest.raises(
        DatasetUnavailable, match=rf"put creditcard.csv \(sha256 [0-9a-f]{{64}}\) in {tmp_path}/creditcard/"
    ):
        load_dataset("creditcard", search_dirs=[tmp_path])


def test_the_papers_split_standardisation_and_under_sampling(card_data):
    features, labels = creditcard.read_creditcard(card_data / "creditcard" / "creditcard.csv")
    data = load_dataset("creditcard", search_dirs=[card_data], seed=3)
    train, test = stratified_split(labels, test_fraction=0.15, seed=3, stream="creditcard")
    # round(0.15 · 40) = 6 frauds and round(0.15 · 360) = 54 others to test; all 34 training frauds
    # kept and int(0.1 · 306) = 30 of the 306 other training rows (reference/004_uldp_fl.md §4.2)
    assert (data.num_test, int(data.y_test.sum())) == (60, 6)
    assert (data.num_train, int(data.y_train.sum())) == (64, 34)
    np.testing.assert_array_equal(data.y_test, labels[test])
    # scaled with the mean and population std of all 340 training rows, before under-sampling
    mean, std = features[train].mean(axis=0), features[train].std(axis=0)
    np.testing.assert_allclose(data.x_test, (features[test] - mean) / std, rtol=1e-5, atol=1e-5)
    assert data.feature_names == creditcard.CREDITCARD_HEADER[:-1] and data.num_classes == 2
    assert data.fitted and "before the under-sampling" in data.fitted[0]
    raw = load_dataset("creditcard", search_dirs=[card_data], seed=3, undersample=1.0, standardise="none")
    np.testing.assert_array_equal(raw.x_train, features[train].astype(np.float32))
    assert raw.fitted == () and raw.num_train == 340
    kept = [row.tobytes() for row in raw.x_train]
    assert all(
        row.tobytes() in kept
        for row in load_dataset("creditcard", search_dirs=[card_data], seed=3, standardise="none").x_train
    )  # the under-sampled rows are training rows, each once


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("undersample", 0.0, r"^`dataset.undersample` must be in \(0, 1\] \(the paper's 0.1\); got 0.0.$"),
        ("standardise", "pooled", r"^`dataset.standardise` must be 'train' or 'none'; got 'pooled'.$"),
        ("seed", -1, r"^`dataset.seed` must be an integer >= 0; got -1.$"),
    ],
)
def test_a_bad_option_names_the_field_and_what_is_allowed(tmp_path, option, value, message):
    with pytest.raises(SpecError, match=message):
        load_dataset("creditcard", search_dirs=[tmp_path], **{option: value})


def test_a_uldp_avg_run_on_generated_files_with_users_first(card_data):
    # the paper's Creditcard allocation (reference §4.3), shrunk: zipf users, each dealt to silos by Zipf
    spec = parse_spec(
        {
            "algorithm": "uldp_avg",
            "params": {"global_lr": 10, "clip": 0.1, "local_lr": 0.01, "local_epochs": 1, "batch_size": 16},
            "dataset": {
                "name": "creditcard",
                "silos": 3,
                "users": {"kind": "zipf", "count": 12, "zipf_alpha": 0.5, "silo_alpha": 2.0},
            },
            "model": {"name": "mlp", "hidden": [30, 30]},
            "rounds": 2,
            "privacy": {"epsilon": 4.0, "delta": 1e-5},
            "seed": 1,
        }
    )
    result = runner.run(spec, data_dirs=[card_data], device="cpu")
    assert result.epsilon is not None and 3.9 < result.epsilon <= 4.0 + 1e-9
    assert np.asarray(result.label_histogram).sum() == 64  # every under-sampled training row in a silo
    assert result.final.accuracy is not None and 0.0 <= result.final.accuracy <= 1.0


def test_the_papers_setting_named_without_its_file_is_one_line_and_exit_1(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DPFL_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("DPFL_HOME", str(tmp_path / "home"))
    code, out, err = run_cli(
        capsys, "reproduce", "uldp", "--setting", "creditcard", "--out", str(tmp_path / "o")
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: dataset 'creditcard' not found: put creditcard.csv in $DPFL_DATA_DIR/creditcard/ "
        f"(now {tmp_path / 'empty'}) or fetch it with `dpfl run SPEC --download`\n"
    )

"""Bring-your-own CSV: encoding, groupings and every error a user can cause."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfl.data import load_dataset, natural_users, partition
from dpfl.errors import SpecError


def _write(tmp_path: Path, text: str, name: str = "table.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _table(rows: int = 50) -> str:
    lines = ["height,colour,site,user,outcome"]
    for i in range(rows):
        lines.append(
            f"{150 + i},{['red', 'blue', 'green'][i % 3]},{['north', 'south'][i % 2]},u{i % 7},"
            f"{'yes' if i % 5 < 2 else 'no'}"
        )
    return "\n".join(lines) + "\n"


def test_numeric_and_categorical_columns_are_encoded(tmp_path: Path) -> None:
    data = load_dataset("csv", path=_write(tmp_path, _table()), label="outcome", silo="site", user_id="user")
    assert data.feature_names == ("height", "colour=blue", "colour=green", "colour=red")
    assert (data.num_train, data.num_test, data.num_classes) == (40, 10, 2)
    # Classes sorted as text: "no" = 0 (30 rows), "yes" = 1 (20 rows); 20% of each to test.
    assert np.bincount(data.y_test).tolist() == [6, 4]
    np.testing.assert_allclose(data.x_train[:, 0].mean(), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.x_train[:, 0].std(), 1.0, atol=1e-5)
    assert np.all(data.x_train[:, 1:].sum(axis=1) == 1)
    assert data.silo_names == ("north", "south")
    assert partition(data, kind="natural", num_silos=2, seed=0).sizes.sum() == 40
    owners = natural_users(data, partition(data, kind="natural", num_silos=2, seed=0))
    assert owners.num_users == 7 and owners.records_per_user().sum() == 40


def test_split_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    path = _write(tmp_path, _table())
    first = load_dataset("csv", path=path, label="outcome", seed=4)
    again = load_dataset("csv", path=path, label="outcome", seed=4)
    other = load_dataset("csv", path=path, label="outcome", seed=5)
    np.testing.assert_array_equal(first.x_test, again.x_test)
    assert not np.array_equal(first.x_test, other.x_test)


def test_numeric_labels_sort_numerically_and_blank_cells_are_imputed(tmp_path: Path) -> None:
    text = "a,b,y\n" + "".join(f"{'' if i == 3 else i},{i % 2},{[2, 10, 9][i % 3]}\n" for i in range(30))
    data = load_dataset("csv", path=_write(tmp_path, text), label="y")
    assert data.num_classes == 3 and data.feature_names == ("a", "b")
    assert not np.isnan(data.x_train).any() and not np.isnan(data.x_test).any()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=str(tmp_path / "nope.csv"), label="y")
    assert str(caught.value) == (
        f"`dataset.path` names no file; got '{tmp_path / 'nope.csv'}'. Give the path of an existing CSV file."
    )


def test_relative_path_is_found_in_a_search_dir(tmp_path: Path) -> None:
    _write(tmp_path, _table(), name="mine.csv")
    data = load_dataset("csv", search_dirs=[tmp_path], path="mine.csv", label="outcome")
    assert data.num_train == 40


def test_missing_label_column_counts_the_columns_and_echoes_none(tmp_path: Path) -> None:
    # The file may be anything the path reaches: its header is never echoed (issue 17, item 2).
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=_write(tmp_path, _table()), label="target")
    assert str(caught.value) == "`dataset.label` names a column table.csv lacks (its header has 5 columns)."


def test_label_is_required(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^`dataset.label` is required \(its header has 5 columns\)\.$"):
        load_dataset("csv", path=_write(tmp_path, _table()))


def test_single_class_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=_write(tmp_path, "x,y\n1,a\n2,a\n"), label="y")
    assert str(caught.value) == "`dataset.label` column 'y' must hold at least 2 classes; got 1."


def test_too_many_rows(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=_write(tmp_path, _table(10)), label="outcome", max_rows=5)
    assert str(caught.value) == (
        f"`dataset.max_rows` is 5 but {tmp_path / 'table.csv'} has more data rows; "
        "use a smaller file or raise dataset.max_rows."
    )


def test_too_many_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path, _table(10))
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=path, label="outcome", max_bytes=100)
    size = Path(path).stat().st_size
    assert str(caught.value) == (
        f"`dataset.max_bytes` is 100 bytes but {path} has {size} bytes; "
        "use a smaller file or raise dataset.max_bytes."
    )


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "")
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=path, label="y")
    assert str(caught.value) == (
        f"`dataset.path` file {path} is empty; a CSV needs a header row and data rows."
    )


def test_header_without_rows(tmp_path: Path) -> None:
    path = _write(tmp_path, "x,y\n")
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=path, label="y")
    assert str(caught.value) == f"`dataset.path` file {path} has a header but no data rows."


def test_ragged_row(tmp_path: Path) -> None:
    path = _write(tmp_path, "x,y\n1,a\n2,b,extra\n")
    with pytest.raises(SpecError) as caught:
        load_dataset("csv", path=path, label="y")
    assert str(caught.value) == f"`dataset.path` data row 2 of {path} has 3 fields; the header has 2."


def test_too_many_categories(tmp_path: Path) -> None:
    text = "name,y\n" + "".join(f"n{i},{i % 2}\n" for i in range(40))
    with pytest.raises(SpecError, match=r"max_categories` is 10 but feature column 1 of 1 has 32 distinct"):
        load_dataset("csv", path=_write(tmp_path, text), label="y", max_categories=10)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_bytes(b"x,y\n\xff\xfe,1\n")
    with pytest.raises(SpecError, match=r"is not a readable UTF-8 CSV .*; save it as UTF-8"):
        load_dataset("csv", path=str(path), label="y")

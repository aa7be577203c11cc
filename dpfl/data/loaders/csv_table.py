"""Bring-your-own data: a CSV file with a header row, a label column and optional groupings."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import lookup_candidates
from dpfl.data.preprocessing import one_hot, standardise, stratified_split
from dpfl.data.registry import DATASETS
from dpfl.data.uploads import upload_record
from dpfl.errors import SpecError

__all__ = ["NonFiniteCell", "load_csv"]


class NonFiniteCell(SpecError):
    """A numeric column holds NaN or an infinity: no model can learn from it.

    Attributes:
        row: the data row (1-based, after the header).
        column: the column's index in the header (0-based).
    """

    def __init__(self, file: Path, row: int, column: int):
        super().__init__(
            "dataset.path",
            f"data row {row} of {file} holds a number that is not finite (NaN or infinite) in column "
            f"{column + 1}; give finite numbers, and leave a missing value's cell empty.",
        )
        self.row, self.column = row, column


@DATASETS.register(
    "csv",
    description="Your own CSV file: a header row, one label column, numeric and categorical features, "
    "optional silo and user columns.",
    source_url="a file you supply (option path)",
    license="the file's own",
    num_classes=None,
    needs_files=True,
    unfitted={"standardise": "none"},
)
def load_csv(
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    path: str | None = None,
    upload: str | None = None,
    label: str | None = None,
    silo: str | None = None,
    user_id: str | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    max_rows: int = 1_000_000,
    max_bytes: int = 200_000_000,
    max_categories: int = 1_000,
    standardise: str = "train",
) -> Dataset:
    """Returns a Dataset built from a CSV file, split train/test by a seeded stratified split.

    Columns: ``label`` names the class column (classes are its distinct values, sorted
    numerically if all are numbers, else as text; class i is the i-th). ``silo`` optionally
    names a column of natural silos (``partition(kind="natural")``), ``user_id`` a column of
    user ids (mapped to 0..U-1 in sorted order). Every other column is a feature:

    - numeric if every non-empty cell parses as a number: standardised with training
      statistics, an empty cell imputed with the training mean (0 after scaling); or, with
      ``standardise="none"``, kept as recorded, an empty cell 0. A cell that is NaN or
      infinite (`nan`, `inf`, `1e999`) is refused;
    - otherwise categorical: one indicator per value seen in training (sorted); a value
      seen only in test gets no indicator.

    Args:
        path: the CSV file; a relative path is looked up in the working directory, then in
            each search directory.
        upload: instead of `path`, the name of a file uploaded to this server
            (`dpfl.data.uploads`); its label, silo and user-id columns are the upload's unless
            given here.
        label: name of the label column.
        silo: name of the natural-silo column, or ``None``.
        user_id: name of the user-id column, or ``None``.
        test_fraction: share of each class held out for testing, in (0, 1).
        seed: seed of the train/test split.
        max_rows: largest number of data rows accepted.
        max_bytes: largest file size accepted, in bytes.
        max_categories: most distinct values a categorical column may have.
        standardise: ``"train"`` (numeric columns with the training rows' statistics) or
            ``"none"`` (as recorded: then only categorical columns, whose values are read from
            the training rows, fit anything on the records).

    Raises:
        SpecError: the file is missing, empty, too large, malformed, or a named column is
            absent; the message names the option to change.
    """
    for field, value, minimum in (
        ("max_rows", max_rows, 1),
        ("max_bytes", max_bytes, 1),
        ("max_categories", max_categories, 1),
        ("seed", seed, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise SpecError(f"dataset.{field}", f"must be an integer >= {minimum}; got {value!r}.")
    if standardise not in ("train", "none"):
        raise SpecError("dataset.standardise", f"must be 'train' or 'none'; got {standardise!r}.")
    if not isinstance(test_fraction, int | float) or not 0 < test_fraction < 1:
        raise SpecError("dataset.test_fraction", f"must be in (0, 1); got {test_fraction!r}.")
    if upload is not None:
        if path is not None:
            raise SpecError(
                "dataset.upload", "names an upload, so `path` must be left out; give one of them."
            )
        file, record = upload_record(cache_dir, upload)
        label = label if label is not None else record.get("label")
        silo = silo if silo is not None else record.get("silo")
        user_id = user_id if user_id is not None else record.get("user_id")
    else:
        file = _resolve(path, search_dirs)
    size = file.stat().st_size
    if size > max_bytes:
        raise SpecError(
            "dataset.max_bytes",
            f"is {max_bytes} bytes but {file} has {size} bytes; "
            "use a smaller file or raise dataset.max_bytes.",
        )
    header, rows = _read_rows(file, max_rows)
    columns = {name: index for index, name in enumerate(header)}
    for field, name in (("label", label), ("silo", silo), ("user_id", user_id)):
        if (name is not None or field == "label") and name not in columns:
            # A path's header is the file's first line: never echoed (the file may be anything);
            # an upload's columns are its uploader's own.
            found = "is required" if name is None else f"names a column {file.name} lacks"
            count = f"{len(header)} column" + ("" if len(header) == 1 else "s")
            shown = f"its columns: {', '.join(header)}" if upload is not None else f"its header has {count}"
            raise SpecError(f"dataset.{field}", f"{found} ({shown}).")
    table = np.array(rows, dtype=object)  # rectangular: _read_rows refuses ragged rows

    def column(name: str) -> np.ndarray:
        return table[:, columns[name]].astype(str)

    label_values = column(label)
    if (np.char.strip(label_values) == "").any():
        row = int(np.flatnonzero(np.char.strip(label_values) == "")[0]) + 1
        raise SpecError(
            "dataset.label", f"column {label!r} is empty in data row {row}; every row needs a label."
        )
    class_names, y = _codes(label_values)
    if len(class_names) < 2:
        raise SpecError(
            "dataset.label",
            f"column {label!r} must hold at least 2 classes; got {len(class_names)}.",
        )
    train, test = stratified_split(y, test_fraction=test_fraction, seed=seed, stream="csv")
    features = [name for name in header if name not in (label, silo, user_id)]
    if not features:
        raise SpecError("dataset.label", f"leaves no feature columns; the file has {len(header)} columns.")
    for name in features:
        _check_finite(file, column(name), columns[name])
    x_train, x_test, names, fitted = _encode(features, column, train, test, max_categories, standardise)
    silo_names = silo_train = silo_test = user_train = None
    if silo is not None:
        silo_names, silo_ids = _codes(column(silo))
        silo_train, silo_test = silo_ids[train], silo_ids[test]
    if user_id is not None:
        user_train = _codes(column(user_id))[1][train]
        user_train = np.unique(user_train, return_inverse=True)[1].astype(np.int64)
    return Dataset(
        x_train=x_train,
        y_train=y[train],
        x_test=x_test,
        y_test=y[test],
        num_classes=len(class_names),
        name="csv",
        class_names=tuple(class_names),
        feature_names=names,
        silo_train=silo_train,
        silo_test=silo_test,
        user_train=user_train,
        fitted=fitted,
        silo_names=silo_names,
    )


def _resolve(path: str | None, search_dirs: Sequence[Path]) -> Path:
    if path is None:
        raise SpecError("dataset.path", "is required; give the path of a CSV file with a header row.")
    if not isinstance(path, str):
        raise SpecError("dataset.path", f"must be a string: the path of a CSV file; got {path!r}.")
    for candidate in lookup_candidates(path, search_dirs):
        if candidate.is_file():
            return candidate
    raise SpecError("dataset.path", f"names no file; got {path!r}. Give the path of an existing CSV file.")


def _read_rows(file: Path, max_rows: int) -> tuple[list[str], list[list[str]]]:
    try:
        with file.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            while header is not None and not any(cell.strip() for cell in header):
                header = next(reader, None)  # blank lines before the header
            if header is None:
                raise SpecError(
                    "dataset.path", f"file {file} is empty; a CSV needs a header row and data rows."
                )
            rows = [row for row in itertools.islice(reader, max_rows + 1) if row]
    except UnicodeDecodeError:  # its message quotes the bytes: not echoed
        raise SpecError(
            "dataset.path",
            f"file {file} is not a readable UTF-8 CSV (it holds bytes that are not UTF-8); "
            "save it as UTF-8 comma-separated text.",
        ) from None
    except csv.Error as error:  # csv's messages name the rule broken, never the text
        raise SpecError(
            "dataset.path",
            f"file {file} is not a readable UTF-8 CSV ({error}); save it as UTF-8 comma-separated text.",
        ) from None
    header = [name.strip() for name in header]
    if len(rows) > max_rows:
        raise SpecError(
            "dataset.max_rows",
            f"is {max_rows} but {file} has more data rows; use a smaller file or raise dataset.max_rows.",
        )
    if not rows:
        raise SpecError("dataset.path", f"file {file} has a header but no data rows.")
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ragged = np.flatnonzero(lengths != len(header))
    if len(ragged):
        row = int(ragged[0])
        raise SpecError(
            "dataset.path",
            f"data row {row + 1} of {file} has {lengths[row]} fields; the header has {len(header)}.",
        )
    first = {}
    for index, name in enumerate(header):
        if name in first:
            raise SpecError(
                "dataset.path",
                f"header of {file} repeats a column name (columns {first[name] + 1} and {index + 1}); "
                "names must be unique.",
            )
        first[name] = index
    return header, rows


def _numbers(values: np.ndarray) -> np.ndarray | None:
    """Returns the column as float64 with NaN for empty cells, or None if it is not numeric."""
    blank = np.char.strip(values) == ""
    if blank.all():
        return None
    try:
        return np.where(blank, "nan", values).astype(np.float64)
    except ValueError:
        return None


def _check_finite(file: Path, values: np.ndarray, index: int) -> None:
    """Refuses a numeric column with a NaN or infinite cell (an empty cell is a missing value)."""
    numbers = _numbers(values)
    if numbers is None:
        return
    bad = ~np.isfinite(numbers) & (np.char.strip(values) != "")
    if bad.any():
        raise NonFiniteCell(file, int(np.flatnonzero(bad)[0]) + 1, index)


def _codes(values: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """Returns (sorted distinct values, int64 code of each row); numbers sort numerically."""
    distinct, codes = np.unique(values, return_inverse=True)
    numbers = _numbers(distinct)
    if numbers is not None and not np.isnan(numbers).any():
        order = np.argsort(numbers, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        distinct, codes = distinct[order], rank[codes]
    return tuple(str(v) for v in distinct), codes.astype(np.int64).reshape(-1)


def _encode(
    features: list[str],
    column: Callable[[str], np.ndarray],
    train: np.ndarray,
    test: np.ndarray,
    max_categories: int,
    scaling: str,
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """Returns (train features, test features, feature names, what was fitted on the training
    rows) of the feature columns."""
    blocks_train, blocks_test, names, fitted = [], [], [], {}
    for name in features:
        values = column(name)
        numbers = _numbers(values)
        if numbers is not None:
            if scaling == "none":
                filled = np.where(np.isnan(numbers), 0.0, numbers)[:, None]
                blocks_train.append(filled[train].astype(np.float32))
                blocks_test.append(filled[test].astype(np.float32))
                names.append(name)
                continue
            mean = np.nanmean(numbers[train]) if not np.isnan(numbers[train]).all() else 0.0
            filled = np.where(np.isnan(numbers), mean, numbers)[:, None]
            scaled = standardise(filled[train], filled[test])
            fitted["numeric"] = (
                "numeric columns standardised (missing cells filled) with the training rows' mean and "
                "standard deviation"
            )
            blocks_train.append(scaled[0])
            blocks_test.append(scaled[1])
            names.append(name)
            continue
        levels = np.unique(values[train])
        if len(levels) > max_categories:
            raise SpecError(
                "dataset.max_categories",
                f"is {max_categories} but feature column {features.index(name) + 1} of "
                f"{len(features)} has {len(levels)} distinct values; drop the column or raise "
                "dataset.max_categories.",
            )
        blocks_train.append(one_hot(values[train], levels.tolist()))
        blocks_test.append(one_hot(values[test], levels.tolist()))
        names += [f"{name}={level}" for level in levels.tolist()]
        fitted["categorical"] = "categorical columns one-hot encoded over the values the training rows hold"
    x_train, x_test = np.concatenate(blocks_train, axis=1), np.concatenate(blocks_test, axis=1)
    return x_train, x_test, tuple(names), tuple(fitted.values())

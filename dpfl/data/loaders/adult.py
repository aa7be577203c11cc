"""UCI Adult (census income > $50K), in a one-hot encoding or the LIBSVM ``a9a`` encoding.

Rows: all 32,561 of ``adult.data`` and all 16,281 of ``adult.test`` (its first line,
``|1x3 Cross validator``, is skipped and the trailing ``.`` of its labels stripped). Rows with a
missing value (``?``) are kept in both encodings, so both have the official row counts and the
same rows as LIBSVM's a9a / a9a.t:

- ``encoding="onehot"``: the 6 numeric columns standardised with training statistics, then
  one indicator per category of the 8 categorical columns, where ``?`` is a category of its
  own (workclass, occupation and native-country have one). 6 + 102 = 108 features.
- ``encoding="a9a"``: Platt's binary encoding behind LIBSVM's a9a (Platt 1998, "Fast training
  of SVMs using SMO"): each continuous column cut into bins (quintiles of the training data;
  tied quintiles leave fewer bins), each category an indicator, a missing value no indicator.
  123 binary features; a row without ``?`` has exactly 14 ones. Column order, category order
  and bin edges below reproduce LIBSVM's a9a feature indices 1..123; they were checked equal,
  row by row, to LIBSVM's a9a file for 545 rows (adult.data rows 1-272 and 416-688) and to
  a9a.t for the first 10 rows of adult.test.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.preprocessing import STANDARDISED, one_hot, standardise
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["A9A_BIN_EDGES", "ADULT_FILES", "load_adult"]

_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
ADULT_FILES = (
    FileSpec("adult/adult.data", "5d7c39d7b8804f071cdd1f2a7c460872", (f"{_URL}adult.data",)),
    FileSpec("adult/adult.test", "35238206dfdf7f1fe215bbb874adecdc", (f"{_URL}adult.test",), test=True),
)

_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
)
# Categories in the order of adult.names, which is also the order of a9a's indicators.
_CATEGORIES = {
    "workclass": "Private Self-emp-not-inc Self-emp-inc Federal-gov Local-gov State-gov Without-pay "
    "Never-worked",
    "education": "Bachelors Some-college 11th HS-grad Prof-school Assoc-acdm Assoc-voc 9th 7th-8th 12th "
    "Masters 1st-4th 10th Doctorate 5th-6th Preschool",
    "marital-status": "Married-civ-spouse Divorced Never-married Separated Widowed Married-spouse-absent "
    "Married-AF-spouse",
    "occupation": "Tech-support Craft-repair Other-service Sales Exec-managerial Prof-specialty "
    "Handlers-cleaners Machine-op-inspct Adm-clerical Farming-fishing Transport-moving Priv-house-serv "
    "Protective-serv Armed-Forces",
    "relationship": "Wife Own-child Husband Not-in-family Other-relative Unmarried",
    "race": "White Asian-Pac-Islander Amer-Indian-Eskimo Other Black",
    "sex": "Female Male",
    "native-country": "United-States Cambodia England Puerto-Rico Canada Germany Outlying-US(Guam-USVI-etc) "
    "India Japan Greece South China Cuba Iran Honduras Philippines Italy Poland Jamaica Vietnam Mexico "
    "Portugal Ireland France Dominican-Republic Laos Ecuador Taiwan Haiti Columbia Hungary Guatemala "
    "Nicaragua Scotland Thailand Yugoslavia El-Salvador Trinadad&Tobago Peru Hong Holand-Netherlands",
}
CATEGORIES = {column: tuple(names.split()) for column, names in _CATEGORIES.items()}
NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")

# a9a bins: a value x falls in bin #{edges <= x}. The edges are the quintiles of the
# training data (numpy's default interpolation gives the same integers), made strictly
# increasing: education-num's quintiles (9, 9, 10, 13) become (9, 10, 11, 13) and
# hours-per-week's (35, 40, 40, 48) become (35, 40, 41, 48), each edge at least one unit above
# the previous. capital-gain and capital-loss are 0 for over 80% of rows, so their quintiles
# all collapse and a9a keeps only "zero" and "non-zero". These fixed edges also encode the
# test file, as LIBSVM's a9a.t does.
A9A_BIN_EDGES = {
    "age": (26, 33, 41, 50),
    "fnlwgt": (106648, 158662, 196338, 259873),
    "education-num": (9, 10, 11, 13),
    "capital-gain": (1,),
    "capital-loss": (1,),
    "hours-per-week": (35, 40, 41, 48),
}
_ENCODINGS = ("onehot", "a9a")


@DATASETS.register(
    "adult",
    description="UCI Adult census income (> $50K): 32,561 train / 16,281 test; one-hot (108 features) "
    "or LIBSVM a9a (123 binary features).",
    source_url="https://archive.ics.uci.edu/dataset/2/adult",
    license="CC BY 4.0",
    num_classes=2,
    files=ADULT_FILES,
    unfitted={"encoding": "a9a"},
)
def load_adult(
    *, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool, encoding: str = "onehot"
) -> Dataset:
    """Returns Adult with label 1 for income > $50K, in the official train/test split.

    Args:
        encoding: ``"onehot"`` (108 features) or ``"a9a"`` (123 binary features), see the
            module docstring.
    """
    if encoding not in _ENCODINGS:
        raise SpecError("dataset.encoding", f"must be one of {', '.join(_ENCODINGS)}; got {encoding!r}.")
    paths = locate(ADULT_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download)
    train, y_train = _read(paths["adult/adult.data"], skip_first=False)
    test, y_test = _read(paths["adult/adult.test"], skip_first=True)
    if encoding == "a9a":
        x_train, names = _a9a(train)
        x_test, _ = _a9a(test)
    else:
        x_train, x_test, names = _onehot(train, test)
    return Dataset(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=2,
        name="adult",
        feature_names=names,
        fitted=() if encoding == "a9a" else (STANDARDISED,),
    )


def _read(path: Path, *, skip_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Returns (string table [rows, 14], labels) of one Adult file."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if skip_first:
        lines = lines[1:]
    table = np.array([line.split(", ") for line in lines], dtype=object)
    if table.ndim != 2 or table.shape[1] != len(_COLUMNS) + 1:
        raise DatasetUnavailable(f"{path} does not have {len(_COLUMNS) + 1} fields on every line")
    labels = np.char.rstrip(table[:, -1].astype(str), ".")
    unknown = set(np.unique(labels)) - {"<=50K", ">50K"}
    if unknown:
        raise DatasetUnavailable(f"{path} has unexpected labels {sorted(unknown)}; expected <=50K and >50K")
    return table[:, :-1].astype(str), (labels == ">50K").astype(np.int64)


def _column(table: np.ndarray, name: str) -> np.ndarray:
    return table[:, _COLUMNS.index(name)]


def _onehot(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    numeric = [_column(train, c).astype(np.float64) for c in NUMERIC]
    numeric_test = [_column(test, c).astype(np.float64) for c in NUMERIC]
    x_train, x_test = standardise(np.stack(numeric, axis=1), np.stack(numeric_test, axis=1))
    blocks_train, blocks_test, names = [x_train], [x_test], list(NUMERIC)
    for column, categories in CATEGORIES.items():
        # "?" is its own category only where it occurs in training; it does in exactly
        # workclass, occupation and native-country.
        levels = categories + (("?",) if (_column(train, column) == "?").any() else ())
        _check_known(train, test, column, levels)
        blocks_train.append(one_hot(_column(train, column), levels))
        blocks_test.append(one_hot(_column(test, column), levels))
        names += [f"{column}={level}" for level in levels]
    return np.concatenate(blocks_train, axis=1), np.concatenate(blocks_test, axis=1), tuple(names)


def _a9a(table: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    blocks, names = [], []
    for column in _COLUMNS:
        if column in A9A_BIN_EDGES:
            edges = A9A_BIN_EDGES[column]
            bins = np.searchsorted(np.array(edges), _column(table, column).astype(np.float64), side="right")
            blocks.append(np.eye(len(edges) + 1, dtype=np.float32)[bins])
            bounds = (None, *edges, None)
            names += [_bin_name(column, lo, hi) for lo, hi in itertools.pairwise(bounds)]
        else:
            _check_known(table, table, column, CATEGORIES[column] + ("?",))
            blocks.append(one_hot(_column(table, column), CATEGORIES[column]))  # "?" -> no indicator
            names += [f"{column}={level}" for level in CATEGORIES[column]]
    return np.concatenate(blocks, axis=1), tuple(names)


def _bin_name(column: str, lo: int | None, hi: int | None) -> str:
    if lo is None:
        return f"{column}<{hi}"
    return f"{column}>={lo}" if hi is None else f"{column}=[{lo},{hi})"


def _check_known(train: np.ndarray, test: np.ndarray, column: str, levels: tuple[str, ...]) -> None:
    seen = set(np.unique(_column(train, column))) | set(np.unique(_column(test, column)))
    unknown = seen - set(levels)
    if unknown:
        raise DatasetUnavailable(f"adult column {column} has unexpected values {sorted(unknown)}")

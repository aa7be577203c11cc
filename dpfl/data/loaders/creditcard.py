"""Credit-card fraud (ULB MLG and Worldline, September 2013), preprocessed as in the ULDP-FL paper.

The file is Kaggle's ``mlg-ulb/creditcardfraud`` ``creditcard.csv``: a header row
``"Time","V1",…,"V28","Amount","Class"`` and 284,807 transactions, 492 of them frauds
(``Class`` 1, written quoted as ``"1"``). ``V1``–``V28`` are the principal components the
owners released instead of the raw fields; ``Time`` is seconds since the first transaction and
``Amount`` the amount. Kaggle needs a login, so the canonical URLs are two byte-identical public
copies: TensorFlow's tutorial mirror and Zenodo record 7395559. OpenML dataset 1597 holds the same
rows as ARFF, a different file. The checksums (150,828,752 bytes) are the ones that several
unrelated public projects pin for the Kaggle download, the Zenodo copy and TensorFlow's mirror;
no copy was downloaded here, so they are quoted, not recomputed.

The ULDP-FL paper (reference/004_uldp_fl.md §4.2) builds its Creditcard task in the authors'
code (``src/dataset.py``, ``load_dataset``, branch ULDP-FL-2023) as follows, and so does this
loader:

1. features: the 30 columns other than ``Class`` (``Time`` and ``Amount`` included);
2. an 85/15 train/test split, stratified on the label (sklearn's ``train_test_split``; here
   ``stratified_split``, ``round(0.15·n_c)`` of class c to test: 74 of the 492 frauds);
3. standardisation with the training rows' mean and standard deviation (sklearn's
   ``StandardScaler``: the population std), fitted before the under-sampling;
4. the majority class of the training rows under-sampled to 10 % (``int(0.1·n_0)`` rows drawn
   without replacement), the test rows kept as they are: 418 frauds + 24,166 others = 24,584
   training rows (the paper's "about 25K") and 42,721 test rows.

The authors draw step 4 from numpy's unseeded global generator and put the frauds first; here
it is drawn from the loader's ``seed`` and the kept rows stay in file order. Their per-silo 10 %
local hold-out is not reproduced (the reference lists it among the code's differences).

The file carries no user: the paper gives records users and silos after loading (§4.3), users
first, then each user's records dealt to silos. A spec says so with
``dataset.users: {kind: zipf, count: 100, zipf_alpha: 0.5, silo_alpha: 2.0}`` (``balanced`` with
``silo_alpha: 0.0`` for the paper's uniform setting), which ``dpfl.data.users.users_first`` draws.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.preprocessing import STANDARDISED, rng_for, standardise, stratified_split
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["CREDITCARD_FILES", "CREDITCARD_HEADER", "load_creditcard", "read_creditcard"]

CREDITCARD_HEADER = ("Time", *(f"V{i}" for i in range(1, 29)), "Amount", "Class")
"""The file's columns, in order; the last is the label."""

CREDITCARD_FILES = (
    FileSpec(
        "creditcard/creditcard.csv",
        "e90efcb83d69faf99fcab8b0255024de",
        (
            "https://storage.googleapis.com/download.tensorflow.org/data/creditcard.csv",
            "https://zenodo.org/records/7395559/files/creditcard.csv?download=1",
        ),
        sha256="76274b691b16a6c49d3f159c883398e03ccd6d1ee12d9d8ee38f4b4b98551a89",
    ),
)
_TEST_FRACTION = 0.15  # the authors' test_size
_UNDERSAMPLE = 0.1  # the authors' `percentage` of the majority class kept


def read_creditcard(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Returns (features float64 [N, 30], labels int64 [N]) of the CSV at `path`, rows in file order.

    Raises:
        DatasetUnavailable: the header is not the 31 columns of ``CREDITCARD_HEADER``, a line
            has the wrong number of fields or a cell that is not a finite number, ``Class`` is
            not 0 or 1, or there are no rows; the message names the file and the line.
    """
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), None)
    except UnicodeDecodeError:
        raise DatasetUnavailable(f"{path} is not the Creditcard CSV: it is not UTF-8 text") from None
    if header is None or tuple(name.strip() for name in header) != CREDITCARD_HEADER:
        found = "no header" if header is None else f"a header of {len(header)} columns"
        raise DatasetUnavailable(
            f"{path} is not the Creditcard CSV: it has {found}; expected the 31 columns "
            "Time, V1..V28, Amount, Class"
        )
    try:
        with warnings.catch_warnings():  # numpy warns on a file without rows: refused below
            warnings.simplefilter("ignore", UserWarning)
            table = np.loadtxt(path, delimiter=",", skiprows=1, quotechar='"', dtype=np.float64, ndmin=2)
    except ValueError:
        raise DatasetUnavailable(f"{path} is not the Creditcard CSV: {_first_fault(path)}") from None
    if len(table) == 0:
        raise DatasetUnavailable(f"{path} is not the Creditcard CSV: it has a header but no rows")
    finite = np.isfinite(table).all(axis=1)
    if not finite.all():
        line = int(np.flatnonzero(~finite)[0]) + 2
        raise DatasetUnavailable(
            f"{path} is not the Creditcard CSV: line {line} holds a NaN or infinite value"
        )
    labels = table[:, -1]
    binary = (labels == 0) | (labels == 1)
    if not binary.all():
        line = int(np.flatnonzero(~binary)[0]) + 2
        raise DatasetUnavailable(
            f"{path} is not the Creditcard CSV: line {line} has Class {labels[line - 2]:g}; allowed: 0 or 1"
        )
    return table[:, :-1], labels.astype(np.int64)


def _first_fault(path: Path) -> str:
    """Returns what is wrong with the first malformed data line (the slow scan after a failed parse)."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for line, row in enumerate(reader, start=2):
            if len(row) != len(CREDITCARD_HEADER):
                return f"line {line} has {len(row)} fields, expected {len(CREDITCARD_HEADER)}"
            for name, cell in zip(CREDITCARD_HEADER, row, strict=True):
                try:
                    float(cell)
                except ValueError:
                    return f"line {line} has a {name} that is not a number"
    return "numpy could not parse it as numbers"


@DATASETS.register(
    "creditcard",
    description="Credit-card fraud (ULB MLG, Kaggle creditcardfraud): 284,807 transactions, 30 features, "
    "492 frauds; the ULDP-FL paper's 85/15 split with the majority class under-sampled to 10 % "
    "(24,584 training rows).",
    source_url="https://www.kaggle.com/datasets/mlg-ulb/creditcardfraud",
    license="ODbL 1.0 (database), DbCL 1.0 (contents); cite Dal Pozzolo et al., CIDM 2015",
    num_classes=2,
    files=CREDITCARD_FILES,
    unfitted={"standardise": "none"},
    metric="balanced_accuracy",  # 0.17 % of the test rows are frauds (the paper's hard-label ROC-AUC)
)
def load_creditcard(
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    seed: int = 0,
    undersample: float = _UNDERSAMPLE,
    standardise: str = "train",
) -> Dataset:
    """Returns the paper's Creditcard task (module docstring): label 1 = fraud.

    Args:
        seed: seed of the train/test split and of the under-sampling, >= 0.
        undersample: share of the majority class's (label 0) training rows kept, in (0, 1];
            the paper's 0.1; 1 keeps every row. The test rows are never under-sampled.
        standardise: ``"train"`` (every feature with the 85 % training rows' mean and population
            standard deviation, as the paper) or ``"none"`` (as recorded: no statistic of the
            records shapes the features).
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError("dataset.seed", f"must be an integer >= 0; got {seed!r}.")
    if not isinstance(undersample, int | float) or isinstance(undersample, bool) or not 0 < undersample <= 1:
        raise SpecError("dataset.undersample", f"must be in (0, 1] (the paper's 0.1); got {undersample!r}.")
    if standardise not in ("train", "none"):
        raise SpecError("dataset.standardise", f"must be 'train' or 'none'; got {standardise!r}.")
    (path,) = locate(
        CREDITCARD_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download
    ).values()
    features, labels = read_creditcard(path)
    train, test = stratified_split(labels, test_fraction=_TEST_FRACTION, seed=seed, stream="creditcard")
    if standardise == "train":
        x_train, x_test = _scaled(features[train], features[test])
    else:
        x_train, x_test = features[train].astype(np.float32), features[test].astype(np.float32)
    kept = _undersampled(labels[train], undersample, seed)
    return Dataset(
        x_train=x_train[kept],
        y_train=labels[train][kept],
        x_test=x_test,
        y_test=labels[test],
        num_classes=2,
        name="creditcard",
        feature_names=CREDITCARD_HEADER[:-1],
        fitted=(STANDARDISED + ", before the under-sampling",) if standardise == "train" else (),
    )


def _scaled(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns both feature blocks scaled by the training rows' mean and population std (sklearn's
    ``StandardScaler``, which the authors use; the loader's option `standardise` hides the function)."""
    return standardise(train, test, ddof=0)


def _undersampled(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Returns the sorted training rows kept: every fraud, and ``int(fraction·n_0)`` of the n_0
    others drawn without replacement (the authors' ``limit_size``)."""
    majority = np.flatnonzero(labels == 0)
    if fraction >= 1:
        return np.arange(len(labels))
    size = int(len(majority) * fraction)
    drawn = rng_for(seed, "creditcard/undersample").choice(majority, size=size, replace=False)
    return np.sort(np.concatenate([np.flatnonzero(labels != 0), drawn]))

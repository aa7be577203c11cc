"""UCI Heart Disease, the four hospitals as natural silos, preprocessed as FLamby's Fed-Heart-Disease.

FLamby (owkin/FLamby, ``flamby/datasets/fed_heart_disease/dataset.py``) defines the
cross-silo benchmark used by the ULDP-FL paper (reference/004_uldp_fl.md §4.2). This loader
reproduces its preprocessing step by step:

1. read each ``processed.<hospital>.data`` file (14 columns, ``?`` = missing);
2. drop ``slope``, ``ca`` and ``thal`` (mostly missing outside Cleveland);
3. drop every row with a missing value among the 11 remaining columns;
4. label = ``num > 0`` (any angiographic disease);
5. one-hot ``cp`` (values 1-4) and ``restecg`` (0-2) dropping the first level, giving
   8 + 3 + 2 = 13 features;
6. split each hospital 66/34 with scikit-learn's ``train_test_split(random_state=43,
   shuffle=True)``, stratified on the label when both classes have more than 2 rows;
7. standardise with training statistics, per hospital by default as FLamby does
   (``standardise="per_silo"``), or pooled over the four hospitals' training rows.

Rows kept per hospital: Cleveland 303 (199 train / 104 test), Hungarian 261 (172 / 89),
Switzerland 46 (30 / 16), VA Long Beach 130 (85 / 45): 740 rows, 486 train, the sizes the
ULDP-FL paper reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.preprocessing import STANDARDISED, standardise
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["HEART_FILES", "HEART_HOSPITALS", "load_heart"]

_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/heart-disease/"
HEART_HOSPITALS = ("cleveland", "hungarian", "switzerland", "va")
_MD5 = {  # the md5s FLamby's download script checks (shared/data/README.md)
    "cleveland": "2d91a8ff69cfd9616aa47b59d6f843db",
    "hungarian": "22e96bee155b5973568101c93b3705f6",
    "switzerland": "9a87f7577310b3917730d06ba9349e20",
    "va": "4249d03ca7711e84f4444768c9426170",
}
HEART_FILES = tuple(
    FileSpec(f"heart_disease/processed.{h}.data", _MD5[h], (f"{_URL}processed.{h}.data",))
    for h in HEART_HOSPITALS
)

_NUM_COLUMNS = 14
_KEPT = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # age .. oldpeak; 10-12 (slope, ca, thal) are dropped
_PLAIN = [0, 1, 3, 4, 5, 7, 8, 9]  # columns used as they are
_DUMMIES = ((2, (2.0, 3.0, 4.0)), (6, (1.0, 2.0)))  # cp and restecg without their first level
FEATURE_NAMES = (
    "age",
    "sex",
    "trestbps",
    "chol",
    "fbs",
    "thalach",
    "exang",
    "oldpeak",
    "cp_2",
    "cp_3",
    "cp_4",
    "restecg_1",
    "restecg_2",
)
_TRAIN_FRACTION = 0.66
_SPLIT_SEED = 43  # FLamby's random_state


@DATASETS.register(
    "heart",
    description="UCI Heart Disease, 4 hospitals as natural silos (FLamby Fed-Heart-Disease): "
    "740 patients, 13 features, label = disease present.",
    source_url="https://archive.ics.uci.edu/dataset/45/heart+disease",
    license="CC BY 4.0",
    num_classes=2,
    natural_silos=4,
    files=HEART_FILES,
    unfitted={"standardise": "none"},
)
def load_heart(
    *, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool, standardise: str = "per_silo"
) -> Dataset:
    """Returns Fed-Heart-Disease with ``silo_train``/``silo_test`` = hospital index.

    Args:
        standardise: ``"per_silo"`` (each hospital with its own training mean and sample
            standard deviation, FLamby's default; no statistic crosses a silo) or
            ``"pooled"`` (one mean and standard deviation over all training rows), or ``"none"``
            (features as recorded: no statistic of the records shapes them).

    Silos are ordered cleveland, hungarian, switzerland, va; rows keep file order within
    each split. A feature constant in a hospital's training rows (Switzerland's ``chol`` is
    0 throughout) becomes 0 there.
    """
    if standardise not in ("per_silo", "pooled", "none"):
        raise SpecError(
            "dataset.standardise", f"must be 'per_silo', 'pooled' or 'none'; got {standardise!r}."
        )
    paths = locate(HEART_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download)
    parts = []
    for silo, spec in enumerate(HEART_FILES):
        features, labels = _read_hospital(paths[spec.relpath])
        train_rows, test_rows = _flamby_split(labels)
        parts.append((silo, features[train_rows], labels[train_rows], features[test_rows], labels[test_rows]))
    x_train = np.concatenate([p[1] for p in parts])
    x_test = np.concatenate([p[3] for p in parts])
    silo_train = np.concatenate([np.full(len(p[2]), p[0], dtype=np.int64) for p in parts])
    silo_test = np.concatenate([np.full(len(p[4]), p[0], dtype=np.int64) for p in parts])
    if standardise == "pooled":
        x_train, x_test = _standardise(x_train, x_test)
    elif standardise == "per_silo":
        scaled = [_standardise(p[1], p[3]) for p in parts]
        x_train = np.concatenate([s[0] for s in scaled])
        x_test = np.concatenate([s[1] for s in scaled])
    else:
        x_train, x_test = x_train.astype(np.float32), x_test.astype(np.float32)
    return Dataset(
        x_train=x_train,
        y_train=np.concatenate([p[2] for p in parts]),
        x_test=x_test,
        y_test=np.concatenate([p[4] for p in parts]),
        num_classes=2,
        name="heart",
        feature_names=FEATURE_NAMES,
        silo_train=silo_train,
        silo_test=silo_test,
        silo_names=HEART_HOSPITALS,
        fitted=()
        if standardise == "none"
        else (
            STANDARDISED + (" pooled over the hospitals" if standardise == "pooled" else " of each hospital"),
        ),
    )


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return standardise(train, test, ddof=1)  # FLamby uses torch.std, the sample std


def _read_hospital(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Returns (13 features, binary labels) of one hospital's complete rows, in file order."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    cells = [line.split(",") for line in lines]
    bad = next((i for i, row in enumerate(cells) if len(row) != _NUM_COLUMNS), None)
    if bad is not None:
        raise DatasetUnavailable(
            f"{path} line {bad + 1} has {len(cells[bad])} fields, expected {_NUM_COLUMNS}"
        )
    table = np.array(cells, dtype=object)
    table[table == "?"] = "nan"
    values = table.astype(np.float64)
    used = values[:, [*_KEPT, _NUM_COLUMNS - 1]]
    values = values[~np.isnan(used).any(axis=1)]
    columns = [values[:, _PLAIN]]
    for column, levels in _DUMMIES:
        columns.append((values[:, [column]] == np.array(levels)[None, :]).astype(np.float64))
    labels = (values[:, _NUM_COLUMNS - 1] > 0).astype(np.int64)
    return np.concatenate(columns, axis=1), labels


def _flamby_split(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns sorted (train, test) row indices exactly as FLamby splits one hospital."""
    # scikit-learn takes seconds to import and only this step and the bundled datasets use
    # it, so it is imported on first use.
    from sklearn.model_selection import train_test_split

    counts = np.bincount(labels, minlength=2)
    stratify = labels if (counts > 2).all() else None
    train, test = train_test_split(
        np.arange(len(labels)),
        test_size=1.0 - _TRAIN_FRACTION,
        train_size=_TRAIN_FRACTION,
        random_state=_SPLIT_SEED,
        shuffle=True,
        stratify=stratify,
    )
    return np.sort(train), np.sort(test)

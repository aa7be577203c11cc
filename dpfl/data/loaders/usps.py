"""USPS handwritten digits (Hull 1994) from LIBSVM's distribution, the one torchvision and most
domain-adaptation code read: ``usps.bz2`` (7,291 training digits) and ``usps.t.bz2`` (2,007 test
digits), bzip2-compressed text in the svmlight format, parsed with the standard library and numpy.

A line is ``<label> <index>:<value> ...``: the label 1..10 is the digit plus one, the indices
1..256 are the pixels of a 16×16 image in row-major order, the values are grey levels in [-1, 1]
(-1 is the background). An index the line leaves out is 0, as the format defines. The loader maps
label ℓ to digit ℓ − 1 and a value v to (v + 1) / 2, so pixels lie in [0, 1] as every image
dataset's here.
"""

from __future__ import annotations

import bz2
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable

__all__ = ["USPS_FILES", "USPS_SHAPE", "load_usps", "read_usps"]

USPS_SHAPE = (16, 16)
"""One image as the models see it: one grey plane of 16×16."""

_PIXELS = 256
_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/"
# md5s: torchvision's datasets/usps.py (no SHA-256 is published that we could check against)
USPS_FILES = (
    FileSpec("usps/usps.bz2", "ec16c51db3855ca6c91edd34d0e9b197", (_URL + "usps.bz2",)),
    FileSpec("usps/usps.t.bz2", "8ea070ee2aca1ac39742fdd1ef5ed118", (_URL + "usps.t.bz2",), test=True),
)


def read_usps(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Returns (pixels float32 [N, 256] in [0, 1], digits int64 [N] in 0..9) from one LIBSVM USPS file.

    Raises:
        DatasetUnavailable: the file is not bzip2, or a line is not `label index:value ...` with a
            label in 1..10, indices in 1..256 and values in [-1, 1] (the message names the line).
    """
    try:
        with bz2.open(path, "rt", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetUnavailable(f"{path} is not LIBSVM's bzip2 USPS file: {exc}") from None
    rows = [line for line in lines if line.strip()]
    pixels = np.zeros((len(rows), _PIXELS), dtype=np.float32)
    labels = np.empty(len(rows), dtype=np.int64)
    for row, line in enumerate(rows):
        try:
            label, *pairs = line.split()
            numbers = np.array(" ".join(pairs).replace(":", " ").split(), dtype=np.float64)
            if len(numbers) != 2 * len(pairs) or not np.isfinite(numbers).all():
                raise ValueError("expected `label index:value ...` with finite numbers")
            if float(label) != int(float(label)):
                raise ValueError(f"the label must be an integer; got {label}")
        except (ValueError, OverflowError) as exc:
            raise DatasetUnavailable(f"{path}, line {row + 1}, is not an svmlight row: {exc}") from None
        index, value = numbers[0::2], numbers[1::2]
        labels[row] = int(float(label))
        if not 1 <= labels[row] <= 10:
            raise DatasetUnavailable(f"{path}, line {row + 1}: the label must be 1..10; got {label}")
        if len(index) and (index.min() < 1 or index.max() > _PIXELS or (index != np.round(index)).any()):
            raise DatasetUnavailable(f"{path}, line {row + 1}: pixel indices must be integers 1..{_PIXELS}")
        if (np.abs(value) > 1).any():
            raise DatasetUnavailable(f"{path}, line {row + 1}: pixel values must lie in [-1, 1]")
        pixels[row, index.astype(np.int64) - 1] = value
    return (pixels + np.float32(1.0)) / np.float32(2.0), labels - 1


@DATASETS.register(
    "usps",
    description="USPS handwritten digits: 7,291 train / 2,007 test grey images, 16×16 in [0, 1].",
    source_url="https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass.html#usps",
    license="none stated; cite Hull, A Database for Handwritten Text Recognition Research (1994)",
    num_classes=10,
    files=USPS_FILES,
)
def load_usps(*, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool) -> Dataset:
    """Returns USPS with LIBSVM's train/test split, rows in the files' order, 256 pixels each (a
    16×16 image, row-major) scaled to [0, 1]."""
    paths = locate(USPS_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download)
    x_train, y_train = read_usps(paths[USPS_FILES[0].relpath])
    x_test, y_test = read_usps(paths[USPS_FILES[1].relpath])
    return Dataset(
        x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test, num_classes=10, name="usps"
    )

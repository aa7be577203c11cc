"""CIFAR-10 from its canonical archive (the "python version": pickled batches in a tar.gz), read
with the standard library and numpy, no framework.

The batches are Python pickles. A pickle can name any function for the reader to call, so they
are read by an unpickler that calls none but numpy's array constructors (`_Batches`): a file is
checked against its SHA-256 before use, and even one that is not official runs no code.
"""

from __future__ import annotations

import importlib
import io
import pickle
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable

__all__ = ["CIFAR10_FILES", "CIFAR10_SHAPE", "load_cifar10", "read_cifar10"]

CIFAR10_SHAPE = (3, 32, 32)
"""One image as the models see it: channels first, as the archive stores the rows."""

CIFAR10_FILES = (
    FileSpec(
        "cifar10/cifar-10-python.tar.gz",
        "c58f30108f718f92721af3b95e74349a",
        ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
        sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
    ),
)
_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_TEST = "test_batch"
# numpy's array constructors, under their numpy 1 and 2 module names, and the codec Python 3 writes
# bytes through in a protocol-2 pickle: all a batch's pickle calls
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _Batches(pickle.Unpickler):
    """Unpickles a CIFAR batch, refusing any callable but numpy's array constructors (and the codec)."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"a CIFAR-10 batch calls no {module}.{name}")
        return getattr(importlib.import_module(module), name)


def read_cifar10(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns (train images, train labels, test images, test labels) from the archive at `path`:
    images uint8 [N, 3072] (red, green, blue planes of 32×32), labels int64 [N].

    Raises:
        DatasetUnavailable: the archive lacks a batch, or a batch is not a CIFAR-10 batch.
    """
    try:
        with tarfile.open(path, "r:gz") as archive:

            def batch(name: str) -> tuple[np.ndarray, np.ndarray]:
                member = archive.extractfile(f"cifar-10-batches-py/{name}")
                if member is None:
                    raise KeyError(name)
                entry = _Batches(io.BytesIO(member.read()), encoding="latin1").load()
                images = np.asarray(entry["data"], dtype=np.uint8)
                labels = np.asarray(entry["labels"], dtype=np.int64)
                if images.ndim != 2 or images.shape[1] != 3072 or len(images) != len(labels):
                    raise ValueError(f"{name} holds images of shape {images.shape} and {len(labels)} labels")
                return images, labels

            train = [batch(name) for name in _TRAIN]
            test = batch(_TEST)
    except (KeyError, tarfile.TarError, pickle.UnpicklingError, ValueError, TypeError, EOFError) as exc:
        raise DatasetUnavailable(f"{path} is not CIFAR-10's python archive: {exc}") from None
    return (
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        *test,
    )


@DATASETS.register(
    "cifar10",
    description="CIFAR-10: 50,000 train / 10,000 test colour images of 10 classes, 3×32×32 in [0, 1].",
    source_url="https://www.cs.toronto.edu/~kriz/cifar.html",
    license="none stated; cite Krizhevsky, Learning Multiple Layers of Features from Tiny Images (2009)",
    num_classes=10,
    files=CIFAR10_FILES,
)
def load_cifar10(*, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool) -> Dataset:
    """Returns CIFAR-10 with its official train/test split, pixels scaled to [0, 1], rows in the
    archive's order and channel-first layout (a row is 3 planes of 32×32)."""
    (path,) = locate(CIFAR10_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download).values()
    x_train, y_train, x_test, y_test = read_cifar10(path)
    scale = np.float32(255.0)
    return Dataset(
        x_train=x_train.astype(np.float32) / scale,
        y_train=y_train,
        x_test=x_test.astype(np.float32) / scale,
        y_test=y_test,
        num_classes=10,
        name="cifar10",
    )

"""MNIST handwritten digits from the four official IDX files (gzip), parsed with numpy."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable

__all__ = ["MNIST_FILES", "load_mnist", "read_idx"]

# The ossci mirror is the one torchvision tries first; the original site often refuses
# scripted downloads. The md5s are the official ones (shared/data/README.md).
_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
MNIST_FILES = tuple(
    FileSpec(f"mnist/{name}", md5, tuple(mirror + name for mirror in _MIRRORS), test=name.startswith("t10k"))
    for name, md5 in _MD5.items()
)

# IDX magic numbers: 0x0000 0803 = unsigned bytes, 3 dimensions; 0x0000 0801 = 1 dimension.
_IMAGES_MAGIC = 0x00000803
_LABELS_MAGIC = 0x00000801


def read_idx(path: Path, *, magic: int) -> np.ndarray:
    """Returns the uint8 array stored in a gzipped IDX file, shaped by its header.

    The IDX format (LeCun et al., the MNIST page): a big-endian int32 magic number whose
    low byte is the number of dimensions and whose third byte is 0x08 (unsigned byte), one
    big-endian int32 size per dimension, then the data in C order.

    Raises:
        DatasetUnavailable: the magic number or the sizes do not match the file.
    """
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    found = int(np.frombuffer(raw, dtype=">u4", count=1)[0]) if len(raw) >= 4 else None
    if found != magic:
        shown = "none" if found is None else f"0x{found:08x}"
        raise DatasetUnavailable(
            f"{path} is not an IDX file of the expected kind: magic {shown}, expected 0x{magic:08x}"
        )
    ndim = magic & 0xFF
    shape = tuple(int(n) for n in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    header = 4 * (1 + ndim)
    if len(raw) - header != int(np.prod(shape)):
        raise DatasetUnavailable(
            f"{path} holds {len(raw) - header} data bytes but its header declares shape {shape}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


@DATASETS.register(
    "mnist",
    description="MNIST handwritten digits: 60,000 train / 10,000 test, 28x28 pixels in [0, 1].",
    source_url="http://yann.lecun.com/exdb/mnist/",
    license="CC BY-SA 3.0",
    num_classes=10,
    files=MNIST_FILES,
)
def load_mnist(*, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool) -> Dataset:
    """Returns MNIST with the official 60k/10k split, pixels flattened to 784 and scaled to [0, 1].

    Rows keep the order of the official files. No standardisation here: a feature
    transform (``features: {pca: 50}``) is applied separately, see ``dpfl.data.transforms``.
    """
    paths = locate(MNIST_FILES, search_dirs=search_dirs, cache_dir=cache_dir, download=download)

    def images(name: str) -> np.ndarray:
        pixels = read_idx(paths[f"mnist/{name}"], magic=_IMAGES_MAGIC)
        # one pass, no float32 temporary: the same values as astype(float32) / 255
        return np.divide(pixels.reshape(len(pixels), -1), np.float32(255.0), dtype=np.float32)

    def labels(name: str) -> np.ndarray:
        return read_idx(paths[f"mnist/{name}"], magic=_LABELS_MAGIC).astype(np.int64)

    x_train, y_train = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    x_test, y_test = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    for split, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        if len(x) != len(y):
            raise DatasetUnavailable(f"MNIST {split} files disagree: {len(x)} images, {len(y)} labels")
    return Dataset(
        x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test, num_classes=10, name="mnist"
    )

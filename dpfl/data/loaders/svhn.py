"""SVHN, the Street View House Numbers' cropped digits (format 2), from its official MATLAB files,
read with scipy, no framework.

Each file (``train_32x32.mat``, ``test_32x32.mat``, ``extra_32x32.mat``) holds two variables: `X`,
uint8 of shape [32, 32, 3, N] (height, width, RGB channel, image), and `y`, the labels [N, 1] in
1..10, where 10 stands for the digit 0 (the dataset's page: "'0' has label 10"). The loader maps 10
to 0, so a label is the digit itself, as in MNIST and USPS.

`extra` (531,131 somewhat less difficult digits) is offered as an option, not a split of its own:
it is more training data of the same distribution, which the voting paper's Digits setting needs
(140 agents × 3,000 = 420,000 records, more than `train`'s 73,257).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, locate
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["SVHN_EXTRA", "SVHN_FILES", "SVHN_SHAPE", "load_svhn", "read_svhn", "svhn_training"]

SVHN_SHAPE = (3, 32, 32)
"""One image as the models see it: channels first, as CIFAR-10's."""

_URL = "http://ufldl.stanford.edu/housenumbers/"
# md5s: torchvision's datasets/svhn.py; SHA-256s (and sizes: 182,040,794, 64,275,384 and
# 1,329,278,602 bytes): tensorflow-datasets' url_checksums/svhn_cropped.txt.
SVHN_FILES = (
    FileSpec(
        "svhn/train_32x32.mat",
        "e26dedcc434d2e4c54c9b2d4a06d8373",
        (_URL + "train_32x32.mat",),
        sha256="435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8",
    ),
    FileSpec(
        "svhn/test_32x32.mat",
        "eb5a983be6a315427106f1b164d9cef3",
        (_URL + "test_32x32.mat",),
        test=True,
        sha256="cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b",
    ),
)
SVHN_EXTRA = FileSpec(
    "svhn/extra_32x32.mat",
    "a93ce644f1a588dc4d68dda5feec44a7",
    (_URL + "extra_32x32.mat",),
    sha256="a133a4beb38a00fcdda90c9489e0c04f900b660ce8a316a5e854838379a71eb3",
)
"""The 531,131 extra training digits (1.3 GB), read only with ``extra=True``."""


def read_svhn(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Returns (images uint8 [N, 3, 32, 32], labels int64 [N] in 0..9) from one SVHN .mat file.

    Raises:
        DatasetUnavailable: the file is not a MATLAB file, or its `X` / `y` are not SVHN's.
    """
    import scipy.io  # 0.2 s: only where an SVHN file is read, not in every run's imports

    try:
        content = scipy.io.loadmat(path, variable_names=("X", "y"))
    # scipy raises any of these on a truncated or foreign file
    except (
        ValueError,
        TypeError,
        OSError,
        IndexError,
        NotImplementedError,
        scipy.io.matlab.MatReadError,
    ) as exc:
        raise DatasetUnavailable(f"{path} is not an SVHN .mat file: {exc}") from None
    if "X" not in content or "y" not in content:
        found = ", ".join(sorted(k for k in content if not k.startswith("__"))) or "none"
        raise DatasetUnavailable(f"{path} is not an SVHN .mat file: it lacks `X` or `y` (variables: {found})")
    images, labels = np.asarray(content["X"]), np.asarray(content["y"])
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[:3] != (32, 32, 3):
        raise DatasetUnavailable(
            f"{path} is not an SVHN .mat file: `X` must be uint8 [32, 32, 3, N]; "
            f"got {images.dtype} {images.shape}"
        )
    count = images.shape[3]
    if labels.size != count or labels.ndim not in (1, 2) or (labels.ndim == 2 and 1 not in labels.shape):
        raise DatasetUnavailable(
            f"{path} is not an SVHN .mat file: `y` must hold one label per image ({count}); "
            f"got shape {labels.shape}"
        )
    labels = labels.reshape(-1).astype(np.int64)
    if count and (labels.min() < 1 or labels.max() > 10):
        raise DatasetUnavailable(
            f"{path} is not an SVHN .mat file: labels must be 1..10 (10 is the digit 0); "
            f"got values in [{labels.min()}, {labels.max()}]"
        )
    # [H, W, C, N] → [N, C, H, W]; 10 → 0
    return np.ascontiguousarray(images.transpose(3, 2, 0, 1)), labels % 10


def svhn_training(paths: dict[str, Path], *, extra: bool) -> tuple[np.ndarray, np.ndarray]:
    """Returns SVHN's training images and labels (`read_svhn`'s form): `train`, then `extra` if asked."""
    parts = [read_svhn(paths[SVHN_FILES[0].relpath])]
    if extra:
        parts.append(read_svhn(paths[SVHN_EXTRA.relpath]))
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])


def _pixels(images: np.ndarray) -> np.ndarray:
    flat = images.reshape(len(images), -1)
    return flat.astype(np.float32) / np.float32(255.0)


@DATASETS.register(
    "svhn",
    description="SVHN house-number digits: 73,257 train (+531,131 extra) / 26,032 test colour images, "
    "3×32×32 in [0, 1].",
    source_url="http://ufldl.stanford.edu/housenumbers/",
    license="non-commercial use only (the dataset's page); cite Netzer et al., Reading Digits in Natural "
    "Images with Unsupervised Feature Learning (2011)",
    num_classes=10,
    files=SVHN_FILES,
)
def load_svhn(
    *, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool, extra: bool = False
) -> Dataset:
    """Returns SVHN with its official train/test split, pixels scaled to [0, 1], channel-first rows
    (3 planes of 32×32) in the files' order; with `extra`, the extra digits follow the training ones.

    Raises:
        SpecError: `extra` is not a boolean (field ``dataset.extra``).
        DatasetUnavailable: a file is missing, corrupted or not SVHN's.
    """
    if not isinstance(extra, bool):
        raise SpecError("dataset.extra", f"must be true or false; got {extra!r}.")
    files = SVHN_FILES + ((SVHN_EXTRA,) if extra else ())
    paths = locate(files, search_dirs=search_dirs, cache_dir=cache_dir, download=download)
    x_train, y_train = svhn_training(paths, extra=extra)
    x_test, y_test = read_svhn(paths[SVHN_FILES[1].relpath])
    return Dataset(
        x_train=_pixels(x_train),
        y_train=y_train,
        x_test=_pixels(x_test),
        y_test=y_test,
        num_classes=10,
        name="svhn",
    )

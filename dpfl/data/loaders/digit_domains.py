"""The voting paper's Digits task (reference/003_voting_dpfl.md §4.1): agents hold SVHN or MNIST
digits, the server holds USPS digits, so agents and server live in different domains.

The paper's setting is 200 agents: 140 with 3,000 SVHN records each (420,000, so SVHN's `train`
and `extra` together) and 60 with 1,000 MNIST records each (all of MNIST's training set), an IID
split within each source; the server has 3,000 unlabelled USPS digits as its public pool and the
rest of USPS (6,298) for testing. As a `Dataset` that is:

- the training split: the agents' records, SVHN's then MNIST's, with one natural silo per agent
  (`partition: {kind: natural}`); which records an agent gets is a random draw fixed by `seed`;
- the test split: all 9,298 USPS digits (LIBSVM's train file, then its test file). The voting
  algorithms carve their public pool from the test split (`carve_public_pool`), so
  `public_pool: 3000` leaves the paper's 6,298 for testing, unchanged algorithms.

The three sources must share one input. The paper's backbone (ImageNet AlexNet) resizes all three
to its own input and says no more, so we choose the smallest common form that loses nothing:
one grey plane of 32×32, as SVHN's side is 32. SVHN's colour becomes luminance (ITU-R BT.601:
0.299 R + 0.587 G + 0.114 B, PIL's "L"); MNIST's 28×28 gets a 2-pixel black border (as LeNet-5
padded it to 32×32), which keeps its 20×20 digits unscaled; USPS's 16×16 is doubled by repeating
each pixel as a 2×2 block (exact, with no interpolation to choose). Grey keeps the 420,000 SVHN
records at 1.7 GB of float32 rather than 5.2 GB in colour.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.files import locate
from dpfl.data.loaders import mnist, svhn, usps
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["DIGIT_DOMAINS_FILES", "DIGIT_DOMAINS_SHAPE", "load_digit_domains"]

DIGIT_DOMAINS_SHAPE = (32, 32)
"""One image of any source as the models see it: one grey plane of 32×32."""

_MNIST_TRAIN = tuple(spec for spec in mnist.MNIST_FILES if not spec.test)
DIGIT_DOMAINS_FILES = (
    svhn.SVHN_FILES[0],
    svhn.SVHN_EXTRA,
    *_MNIST_TRAIN,
    # USPS is this dataset's test split, all of it
    *(dataclasses.replace(spec, test=True) for spec in usps.USPS_FILES),
)
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_SVHN_STREAM, _MNIST_STREAM = 0x5F4E, 0x4D4E  # each source's draw has its own stream of `seed`
# IDX magic numbers of MNIST's image and label files (`mnist.read_idx`)
_IMAGES_MAGIC, _LABELS_MAGIC = 0x00000803, 0x00000801


def _count(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"dataset.{field}", f"must be an integer ≥ {minimum}; got {value!r}.")
    return value


def _draw(available: int, agents: int, records: int, *, seed: int, stream: int, field: str) -> np.ndarray:
    """Returns `agents × records` distinct rows out of `available`, in a random order: agent a gets
    the a-th block of `records` (an IID split of a uniformly random subset)."""
    if agents * records > available:
        raise SpecError(
            f"dataset.{field}",
            f"must be ≤ {available // agents} for {agents} agents: the source has {available} training "
            f"records; got {records}.",
        )
    return np.random.default_rng([seed, stream]).permutation(available)[: agents * records]


def _grey_svhn(images: np.ndarray) -> np.ndarray:
    """SVHN uint8 [N, 3, 32, 32] → luminance float32 [N, 1024] in [0, 1]."""
    luma = np.tensordot(images.astype(np.float32), _LUMA, axes=([1], [0]))
    return (luma / np.float32(255.0)).reshape(len(images), -1)


def _padded_mnist(images: np.ndarray) -> np.ndarray:
    """MNIST uint8 [N, 28, 28] → float32 [N, 1024] in [0, 1], with a 2-pixel black border."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    return padded.reshape(len(images), -1).astype(np.float32) / np.float32(255.0)


def _doubled_usps(pixels: np.ndarray) -> np.ndarray:
    """USPS float32 [N, 256] → float32 [N, 1024]: each pixel of the 16×16 image as a 2×2 block."""
    images = pixels.reshape(len(pixels), 16, 16)
    return images.repeat(2, axis=1).repeat(2, axis=2).reshape(len(pixels), -1)


@DATASETS.register(
    "digit_domains",
    description="Digits across domains (the voting paper's SVHN, MNIST → USPS): 140 SVHN agents × 3,000 "
    "and 60 MNIST agents × 1,000 as natural silos, all 9,298 USPS digits as the test split; grey 32×32 "
    "in [0, 1].",
    source_url="https://arxiv.org/abs/2010.04851",
    license="SVHN non-commercial use only; MNIST CC BY-SA 3.0; USPS none stated",
    num_classes=10,
    natural_silos=200,
    files=DIGIT_DOMAINS_FILES,
)
def load_digit_domains(
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    svhn_agents: int = 140,
    svhn_records: int = 3000,
    mnist_agents: int = 60,
    mnist_records: int = 1000,
    svhn_extra: bool = True,
    seed: int = 0,
) -> Dataset:
    """Returns the agents' SVHN and MNIST records (one natural silo per agent, SVHN's first) as the
    training split and all of USPS as the test split, every image grey 32×32 in [0, 1].

    Args:
        svhn_agents, svhn_records: agents holding SVHN digits, and records each.
        mnist_agents, mnist_records: agents holding MNIST digits, and records each.
        svhn_extra: draw the SVHN agents' records from `train` and `extra` (531,131 more digits,
            1.3 GB), as the paper's 420,000 need; False reads `train` only (73,257).
        seed: which records each agent gets (fixed per dataset, not per run, so that every run
            of a comparison sees the same agents).

    Raises:
        SpecError: an option is out of range, or the agents need more records than a source has
            (naming the option).
        DatasetUnavailable: a file is missing, corrupted or not in its format.
    """
    for field, value, minimum in (
        ("svhn_agents", svhn_agents, 1),
        ("svhn_records", svhn_records, 1),
        ("mnist_agents", mnist_agents, 1),
        ("mnist_records", mnist_records, 1),
        ("seed", seed, 0),
    ):
        _count(field, value, minimum)
    if not isinstance(svhn_extra, bool):
        raise SpecError("dataset.svhn_extra", f"must be true or false; got {svhn_extra!r}.")
    files = [spec for spec in DIGIT_DOMAINS_FILES if svhn_extra or spec.relpath != svhn.SVHN_EXTRA.relpath]
    paths = locate(files, search_dirs=search_dirs, cache_dir=cache_dir, download=download)

    svhn_x, svhn_y = svhn.svhn_training(paths, extra=svhn_extra)
    rows = _draw(len(svhn_y), svhn_agents, svhn_records, seed=seed, stream=_SVHN_STREAM, field="svhn_records")
    svhn_x, svhn_y = _grey_svhn(svhn_x[rows]), svhn_y[rows]

    images = mnist.read_idx(paths[_MNIST_TRAIN[0].relpath], magic=_IMAGES_MAGIC)
    labels = mnist.read_idx(paths[_MNIST_TRAIN[1].relpath], magic=_LABELS_MAGIC).astype(np.int64)
    if len(images) != len(labels):
        raise DatasetUnavailable(
            f"MNIST's training files disagree: {len(images)} images, {len(labels)} labels"
        )
    rows = _draw(
        len(labels), mnist_agents, mnist_records, seed=seed, stream=_MNIST_STREAM, field="mnist_records"
    )
    mnist_x, mnist_y = _padded_mnist(images[rows]), labels[rows]

    usps_parts = [usps.read_usps(paths[spec.relpath]) for spec in usps.USPS_FILES]
    silos = np.concatenate(
        [
            np.arange(svhn_agents).repeat(svhn_records),
            svhn_agents + np.arange(mnist_agents).repeat(mnist_records),
        ]
    )
    return Dataset(
        x_train=np.concatenate([svhn_x, mnist_x]),
        y_train=np.concatenate([svhn_y, mnist_y]),
        x_test=np.concatenate([_doubled_usps(x) for x, _ in usps_parts]),
        y_test=np.concatenate([y for _, y in usps_parts]),
        num_classes=10,
        name="digit_domains",
        silo_train=silos.astype(np.int64),
        silo_names=tuple(f"svhn {a + 1}" for a in range(svhn_agents))
        + tuple(f"mnist {a + 1}" for a in range(mnist_agents)),
    )

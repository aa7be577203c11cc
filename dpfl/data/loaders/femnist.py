"""FEMNIST (LEAF's federated EMNIST): handwritten digits and letters, the writers as natural users.

LEAF (TalwalkarLab/leaf, ``data/femnist/preprocess.sh``) builds FEMNIST from NIST Special
Database 19 and writes it as JSON files, at most 100 writers a file, each an object

    {"users": [writer, ...], "num_samples": [n, ...],
     "user_data": {writer: {"x": [[784 pixels], ...], "y": [class, ...]}}}

(``preprocess/data_to_json.py``): an image is the 128×128 scan reduced to 28×28 grey levels
divided by 255, so white paper is 1 and ink near 0, row by row; a class is 0-9 for digits,
10-35 for upper-case and 36-61 for lower-case letters. ``preprocess.sh -t sample`` then splits
each writer's images into ``train/*.json`` and ``test/*.json`` (90/10 by default).

The files are the output of LEAF's scripts, whose sampling options (``-s``, ``--sf``, ``-k``,
``-t``) decide which writers and images they hold, so no canonical file or checksum exists and
none is checked. The loader reads the folder ``femnist/`` of the first data folder that holds
``femnist/train/*.json`` and refuses a file that breaks the format above, naming the file, the
writer and what is wrong. Nothing is downloaded.

Every training image's user is its writer (``Dataset.user_train``), so user-level runs take the
writers as users with ``dataset.users: {kind: natural}``; a writer's images may fall in several
silos, as users do in the ULDP-FL setting (reference/004_uldp_fl.md §1.1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.registry import DATASETS
from dpfl.errors import DatasetUnavailable

__all__ = ["FEMNIST_CLASSES", "FEMNIST_FOLDER", "load_femnist", "read_leaf_folder", "read_leaf_json"]

FEMNIST_FOLDER = "femnist"
"""The folder under a data folder that holds LEAF's ``train/`` and ``test/``."""
FEMNIST_CLASSES = 62
_PIXELS = 28 * 28


def read_leaf_json(path: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Returns (writer, images float32 [n, 784], classes int64 [n]) for every writer of one LEAF
    JSON file, in the order of its ``users`` list.

    Raises:
        DatasetUnavailable: the file is not JSON, lacks ``users``, ``num_samples`` or ``user_data``,
            or a writer's data breaks the format (the message names the writer and the rule).
    """

    def refuse(what: str) -> DatasetUnavailable:
        return DatasetUnavailable(f"{path} is not a LEAF FEMNIST file: {what}")

    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        position = f" (line {error.lineno})" if isinstance(error, json.JSONDecodeError) else ""
        raise refuse(f"it is not JSON text{position}") from None
    if not isinstance(data, dict) or not {"users", "num_samples", "user_data"} <= data.keys():
        raise refuse("it needs an object with the keys users, num_samples and user_data")
    users, counts, user_data = data["users"], data["num_samples"], data["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise refuse("users must be a list of writer ids (strings)")
    if len(set(users)) != len(users):
        raise refuse("users names a writer twice")
    if not isinstance(counts, list) or len(counts) != len(users):
        raise refuse(f"num_samples must list one count per user ({len(users)})")
    if not isinstance(user_data, dict):
        raise refuse("user_data must be an object keyed by writer")
    pairs = zip(users, counts, strict=True)
    return [_writer(refuse, writer, count, user_data.get(writer)) for writer, count in pairs]


def _writer(
    refuse: Callable[[str], DatasetUnavailable], writer: str, count: object, entry: object
) -> tuple[str, np.ndarray, np.ndarray]:
    """Returns one writer's (writer, images, classes), checked against LEAF's format."""
    lists = isinstance(entry, dict) and all(isinstance(entry.get(k), list) for k in ("x", "y"))
    if not lists:
        raise refuse(f"user_data lacks writer {writer!r}'s x and y lists")
    whole = isinstance(count, int) and not isinstance(count, bool)
    if not whole or count != len(entry["x"]) or count != len(entry["y"]):
        raise refuse(
            f"writer {writer!r} has num_samples {count!r} but {len(entry['x'])} images and "
            f"{len(entry['y'])} classes; they must agree"
        )
    try:  # without a dtype, so that text or nested lists show up as a non-numeric array
        images = np.asarray(entry["x"]) if count else np.zeros((0, _PIXELS))
    except ValueError:  # ragged lists
        images = np.zeros(0, dtype=object)
    if images.ndim != 2 or images.dtype.kind not in "fiu":
        raise refuse(f"writer {writer!r}'s images are not lists of {_PIXELS} numbers")
    if images.shape[1] != _PIXELS:
        raise refuse(f"writer {writer!r}'s images have {images.shape[1]} pixels; expected {_PIXELS} (28×28)")
    if not (np.isfinite(images).all() and (images >= 0).all() and (images <= 1).all()):
        raise refuse(f"writer {writer!r} has a pixel outside [0, 1]")
    labels = entry["y"]
    if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < FEMNIST_CLASSES for c in labels):
        raise refuse(f"writer {writer!r} has a class that is not an integer in [0, {FEMNIST_CLASSES})")
    return writer, images.astype(np.float32), np.asarray(labels, dtype=np.int64).reshape(count)


def read_leaf_folder(folder: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Returns (images float32 [N, 784], classes int64 [N], writer of each row) of every ``*.json``
    in `folder`: files in name order, writers in each file's order, images in each writer's order.

    Raises:
        DatasetUnavailable: the folder holds no JSON file, or a file is malformed.
    """
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DatasetUnavailable(f"{folder} holds no LEAF FEMNIST file (*.json)")
    images, labels, writers = [], [], []
    for path in files:
        for writer, x, y in read_leaf_json(path):
            images.append(x)
            labels.append(y)
            writers += [writer] * len(y)
    if not writers:
        raise DatasetUnavailable(f"{folder} holds LEAF files without any image")
    return np.concatenate(images), np.concatenate(labels), writers


def _located(search_dirs: Sequence[Path], cache_dir: Path | None) -> Path:
    """Returns the first ``femnist/`` folder that holds ``train/*.json``, or refuses in one line."""
    roots = [*search_dirs, *([] if cache_dir is None else [cache_dir])]
    for root in roots:
        folder = Path(root) / FEMNIST_FOLDER
        if any((folder / "train").glob("*.json")):
            return folder
    home = f"{roots[0]}/{FEMNIST_FOLDER}" if roots else f"<data dir>/{FEMNIST_FOLDER}"
    looked = ", ".join(str(r) for r in roots) or "no folders"
    raise DatasetUnavailable(
        f"dataset 'femnist' not found: put LEAF's train/*.json and test/*.json (made by LEAF's "
        f"data/femnist/preprocess.sh -t sample; there is nothing to download) in {home}/ "
        f"(looked in: {looked})"
    )


@DATASETS.register(
    "femnist",
    description="FEMNIST (LEAF): 28×28 handwritten digits and letters, 62 classes, in [0, 1]; "
    "each image's writer is its user (users: {kind: natural}).",
    source_url="https://leaf.cmu.edu/ (TalwalkarLab/leaf, data/femnist)",
    license="NIST Special Database 19's terms (the images); LEAF's scripts BSD-2-Clause",
    num_classes=FEMNIST_CLASSES,
    needs_files=True,
    folder=FEMNIST_FOLDER,
)
def load_femnist(*, search_dirs: Sequence[Path], cache_dir: Path | None, download: bool) -> Dataset:
    """Returns FEMNIST from LEAF's ``train/`` and ``test/`` JSON files, with the writer of every
    training image as its user (ids 0..W-1 in sorted writer order).

    Pixels are kept as LEAF wrote them (white 1, ink 0). `download` changes nothing: LEAF's files
    are generated by its scripts, never fetched.
    """
    folder = _located(search_dirs, cache_dir)
    x_train, y_train, writers = read_leaf_folder(folder / "train")
    x_test, y_test, _ = read_leaf_folder(folder / "test")
    _, user_train = np.unique(np.asarray(writers), return_inverse=True)
    return Dataset(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=FEMNIST_CLASSES,
        name="femnist",
        user_train=user_train.astype(np.int64).reshape(-1),
    )

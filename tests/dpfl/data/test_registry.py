"""Conformance of every registered dataset: metadata, option checking, missing files, determinism."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dpfl.data import DATASETS, Dataset, dataset_info, load_dataset, registered_datasets
from dpfl.errors import DatasetUnavailable, SpecError, UnknownNameError

GENERATED = ["digits", "breast_cancer", "synthetic", "logistic"]
WITH_FILES = [name for name in registered_datasets() if dataset_info(name).files]


def test_registry_holds_the_designed_datasets() -> None:
    assert registered_datasets() == [
        "adult",
        "breast_cancer",
        "cifar10",
        "creditcard",
        "csv",
        "digit_domains",
        "digits",
        "femnist",
        "heart",
        "logistic",
        "mnist",
        "svhn",
        "synthetic",
        "usps",
    ]


@pytest.mark.parametrize("name", registered_datasets())
def test_metadata_is_complete(name: str) -> None:
    info = dataset_info(name)
    assert info.name == name
    assert info.description and info.source_url and info.license
    assert info.num_classes is None or info.num_classes >= 2
    # csv reads the file it is given, femnist a folder of LEAF files: neither has fixed files
    assert info.needs_files == (name in WITH_FILES or name in ("csv", "femnist"))
    for spec in info.files:
        assert re.fullmatch(r"[0-9a-f]{32}", spec.md5)
        assert spec.relpath.count("/") == 1 and spec.urls


@pytest.mark.parametrize("name", registered_datasets())
def test_unknown_option_is_refused_with_the_allowed_ones(name: str) -> None:
    allowed = [option for option, _ in dataset_info(name).options]
    with pytest.raises(SpecError) as caught:
        load_dataset(name, colour="blue")
    assert caught.value.field == "dataset.colour"
    assert str(caught.value).endswith(f"allowed options: {', '.join(allowed) if allowed else 'none'}.")


@pytest.mark.parametrize("name", WITH_FILES)
def test_missing_files_name_each_file_and_md5(name: str, tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset(name, search_dirs=[tmp_path])
    for spec in dataset_info(name).files:
        algorithm, digest = spec.checksum  # SHA-256 where it is known
        assert f"put {spec.basename} ({algorithm} {digest}) in {tmp_path}/{spec.folder}/" in str(caught.value)


@pytest.mark.parametrize("name", GENERATED)
def test_generated_and_bundled_data_are_deterministic(name: str) -> None:
    first, second = load_dataset(name), load_dataset(name)
    assert isinstance(first, Dataset) and first.name == name
    assert first.num_classes == dataset_info(name).num_classes
    np.testing.assert_array_equal(first.x_train, second.x_train)
    np.testing.assert_array_equal(first.y_test, second.y_test)


def test_unknown_dataset_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownNameError) as caught:
        load_dataset("imagenet")
    assert str(caught.value) == f"unknown dataset 'imagenet'; registered: {', '.join(registered_datasets())}"


def test_registering_a_taken_name_is_refused() -> None:
    with pytest.raises(ValueError, match="dataset 'mnist' is already registered"):
        register = DATASETS.register("mnist", description="x", source_url="x", license="x", num_classes=2)
        register(lambda **_: None)

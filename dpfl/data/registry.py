"""The dataset registry: loaders registered by name, with metadata the API and UI can list.

A loader is a function ``load(*, search_dirs, cache_dir, download, **options) -> Dataset``.
Its options are its own keyword arguments, so the registry can refuse an unknown option
with the list of allowed ones before any file is read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec
from dpfl.errors import SpecError
from dpfl.metrics import HEADLINE_METRICS, HeadlineMetric
from dpfl.registry import Registry

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "Loader",
    "dataset_info",
    "headline_metric",
    "load_dataset",
    "registered_datasets",
]

Loader = Callable[..., Dataset]

_COMMON = ("search_dirs", "cache_dir", "download")


@dataclass(frozen=True)
class DatasetInfo:
    """What a registered dataset is, for listings and forms.

    Attributes:
        name: registry key, snake_case and stable.
        description: one line for humans.
        source_url: where the data comes from (the paper or the archive).
        license: the data's license, e.g. ``"CC BY 4.0"``.
        num_classes: number of classes, or ``None`` when it depends on the data (``csv``).
        natural_silos: number of natural silos with the default options, or ``None`` when the
            data has no natural grouping by default.
        needs_files: whether the loader reads files that may be missing (``DatasetUnavailable``).
        files: the files it needs, with md5s (empty for generated or bundled data).
        folder: for a dataset read from a folder of files that has no fixed list (FEMNIST's LEAF
            JSON), the folder under a data folder that holds them; None otherwise.
        options: the loader's option names and defaults.
        unfitted: the options under which the loader fits nothing on the records (no statistic of
            the rows shapes the features), which a dataset with a privacy budget needs; empty when
            its defaults fit nothing or no option can avoid a fit.
        metric: the test metric its results are reported in (`dpfl.metrics.HEADLINE_METRICS`):
            ``"accuracy"``, or ``"balanced_accuracy"`` for a task whose test set is imbalanced.
    """

    name: str
    description: str
    source_url: str
    license: str
    num_classes: int | None
    natural_silos: int | None
    needs_files: bool
    files: tuple[FileSpec, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    unfitted: tuple[tuple[str, Any], ...] = ()
    folder: str | None = None
    metric: HeadlineMetric = "accuracy"


def _dataset_entry(
    name: str,
    loader: Loader,
    *,
    description: str,
    source_url: str,
    license: str,
    num_classes: int | None,
    natural_silos: int | None = None,
    files: Sequence[FileSpec] = (),
    needs_files: bool | None = None,
    unfitted: dict[str, Any] | None = None,
    folder: str | None = None,
    metric: HeadlineMetric = "accuracy",
) -> tuple[DatasetInfo, Loader]:
    """Returns the dataset's metadata, its options read from the loader's keyword-only parameters."""
    options = tuple(
        (p.name, p.default)
        for p in inspect.signature(loader).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _COMMON
    )
    info = DatasetInfo(
        name=name,
        description=description,
        source_url=source_url,
        license=license,
        num_classes=num_classes,
        natural_silos=natural_silos,
        needs_files=bool(files) if needs_files is None else needs_files,
        files=tuple(files),
        options=options,
        unfitted=tuple((unfitted or {}).items()),
        folder=folder,
        metric=metric,
    )
    if metric not in HEADLINE_METRICS:
        raise ValueError(f"metric must be one of {', '.join(HEADLINE_METRICS)}; got {metric!r}")
    return info, loader


DATASETS: Registry[tuple[DatasetInfo, Loader]] = Registry("dataset", _dataset_entry, field="dataset.name")
"""Every dataset, by name: ``@DATASETS.register("mnist", description=..., ...)`` above the loader."""


def registered_datasets() -> list[str]:
    """Returns the registered dataset names, sorted."""
    return DATASETS.names()


def dataset_info(name: str) -> DatasetInfo:
    """Returns the metadata of a registered dataset.

    Raises:
        UnknownNameError: ``name`` is not registered; the message lists what is.
    """
    return DATASETS[name][0]


def headline_metric(name: str) -> HeadlineMetric:
    """Returns the test metric results on dataset `name` are reported in (`DatasetInfo.metric`).

    A name that is not registered is data of its own with no metadata here (an uploaded CSV, listed
    under the upload's name; an external run's dataset): its results are in accuracy.
    """
    return DATASETS[name][0].metric if name in DATASETS else "accuracy"


def load_dataset(
    name: str,
    *,
    search_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    download: bool = False,
    **options: Any,
) -> Dataset:
    """Returns the dataset ``name`` built with ``options``.

    Args:
        name: a registered dataset name.
        search_dirs: folders holding dataset files (each as ``<dir>/<dataset folder>/<file>``).
        cache_dir: folder for downloads; ``None`` disables downloading.
        download: allow fetching missing files (the only network access in the library).
        **options: the loader's own options, e.g. ``encoding="a9a"`` for ``adult``.

    Raises:
        UnknownNameError: ``name`` is not registered.
        SpecError: an option is not one of the loader's (field ``dataset.<option>``).
        DatasetUnavailable: a file the loader needs is missing or corrupted.
    """
    info, loader = DATASETS[name]
    allowed = [option for option, _ in info.options]
    for option in options:
        if option not in allowed:
            listed = ", ".join(allowed) if allowed else "none"
            raise SpecError(
                f"dataset.{option}", f"is not an option of dataset {name!r}; allowed options: {listed}."
            )
    return loader(
        search_dirs=tuple(Path(d) for d in search_dirs),
        cache_dir=None if cache_dir is None else Path(cache_dir),
        download=download,
        **options,
    )

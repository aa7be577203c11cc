"""Datasets, partitions of a training set across silos, and users across silos.

Typical use::

    data = load_dataset("mnist", search_dirs=[data_dir])
    data = apply_features(data, {"pca": 50})
    silos = partition(data, kind="dirichlet", num_silos=10, seed=0, alpha=0.5)
    owners = users(silos, num_users=100, kind="zipf", seed=0)

Nothing here reads the environment: the CLI resolves ``DPFL_DATA_DIR`` and passes the
folders down as ``search_dirs``.
"""

from dpfl.data import loaders as _loaders  # noqa: F401  (registers the datasets)
from dpfl.data.dataset import Dataset
from dpfl.data.files import FileSpec, file_md5, locate
from dpfl.data.partition import Partition, partition, partition_kinds
from dpfl.data.registry import (
    DATASETS,
    DatasetInfo,
    dataset_info,
    headline_metric,
    load_dataset,
    registered_datasets,
)
from dpfl.data.transforms import apply_features, binary_labels, feature_transforms, pca
from dpfl.data.users import UserAllocation, natural_users, user_kinds, users, users_first

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetInfo",
    "FileSpec",
    "Partition",
    "UserAllocation",
    "apply_features",
    "binary_labels",
    "dataset_info",
    "feature_transforms",
    "file_md5",
    "headline_metric",
    "load_dataset",
    "locate",
    "natural_users",
    "partition",
    "partition_kinds",
    "pca",
    "registered_datasets",
    "user_kinds",
    "users",
    "users_first",
]

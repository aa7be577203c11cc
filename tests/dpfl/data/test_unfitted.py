"""Every loader that fits a statistic on the records says which options fit nothing (what a
dataset with a privacy budget runs with), and under them nothing is fitted (issue 39)."""

from __future__ import annotations

import numpy as np
import pytest

from dpfl.data import dataset_info, load_dataset, registered_datasets
from tests.factories import data_dir

FITTING = ["adult", "breast_cancer", "creditcard", "csv", "heart"]


def test_exactly_the_fitting_loaders_declare_unfitted_options():
    assert [n for n in registered_datasets() if dataset_info(n).unfitted] == FITTING


@pytest.mark.parametrize("name", ["adult", "breast_cancer", "heart"])
def test_under_the_unfitted_options_nothing_is_fitted(name):
    dirs = [data_dir()]
    fitted = load_dataset(name, search_dirs=dirs)
    unfitted = load_dataset(name, search_dirs=dirs, **dict(dataset_info(name).unfitted))
    assert fitted.fitted and unfitted.fitted == ()
    assert unfitted.x_train.shape[0] == fitted.x_train.shape[0]
    assert unfitted.x_train.dtype == np.float32
    if name != "adult":  # the same features, as recorded: not centred on the training rows
        assert np.abs(unfitted.x_train.mean(axis=0)).max() > 1.0 > np.abs(fitted.x_train.mean(axis=0)).max()


def test_a_csv_keeps_numbers_as_recorded_and_only_its_categories_are_fitted(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "a,b,y\n"
        + "".join(f"{'' if i == 3 else i * 10},{'x' if i % 2 else 'z'},{i % 2}\n" for i in range(40))
    )
    data = load_dataset("csv", path=str(path), label="y", standardise="none")
    both = np.concatenate([data.x_train[:, 0], data.x_test[:, 0]])
    assert sorted(both.tolist()) == sorted([0.0] + [i * 10.0 for i in range(40) if i != 3])
    assert data.fitted == ("categorical columns one-hot encoded over the values the training rows hold",)
    numeric = tmp_path / "n.csv"
    numeric.write_text("a,y\n" + "".join(f"{i},{i % 2}\n" for i in range(40)))
    assert load_dataset("csv", path=str(numeric), label="y", standardise="none").fitted == ()
    assert len(load_dataset("csv", path=str(numeric), label="y").fitted) == 1

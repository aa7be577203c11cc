"""Partitions: coverage, label histograms, determinism and each kind's defining property."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dpfl.data import Dataset, partition, partition_kinds
from dpfl.errors import SpecError, UnknownNameError
from tests.dpfl.data.factories import labelled

SYNTHETIC_KINDS = [
    ("iid", {}),
    ("dirichlet", {"alpha": 0.3}),
    ("shards", {"labels_per_silo": 2}),
    ("label_sets", {"labels_per_silo": 2}),
    ("quantity", {"alpha": 0.5}),
]
MNIST_CLASS_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def test_registered_kinds() -> None:
    assert partition_kinds() == ["dirichlet", "iid", "label_sets", "natural", "pairs", "quantity", "shards"]


@pytest.mark.parametrize(
    ("kind", "options", "num_silos"),
    [
        ("iid", {}, 10),
        ("dirichlet", {"alpha": 0.5}, 20),
        ("shards", {"labels_per_silo": 2}, 100),
        ("label_sets", {"labels_per_silo": 6}, 100),
        ("pairs", {}, 25),
        ("quantity", {"alpha": 0.5}, 20),
    ],
)
def test_every_mnist_record_is_in_exactly_one_silo(
    mnist: Dataset, kind: str, options: dict, num_silos: int
) -> None:
    silos = partition(mnist, kind=kind, num_silos=num_silos, seed=0, **options)
    assert silos.num_silos == num_silos and silos.sizes.min() >= 1
    np.testing.assert_array_equal(np.sort(np.concatenate(silos.silo_indices)), np.arange(60000))
    histogram = silos.label_histogram()
    assert histogram.shape == (num_silos, 10)
    assert histogram.sum(axis=0).tolist() == MNIST_CLASS_COUNTS
    np.testing.assert_array_equal(histogram.sum(axis=1), silos.sizes)


@pytest.mark.parametrize(("kind", "options"), SYNTHETIC_KINDS)
def test_same_seed_same_partition_other_seed_other_partition(kind: str, options: dict) -> None:
    data = labelled([40, 30, 20, 10])
    first = partition(data, kind=kind, num_silos=5, seed=7, **options)
    again = partition(data, kind=kind, num_silos=5, seed=7, **options)
    other = partition(data, kind=kind, num_silos=5, seed=8, **options)
    for a, b in zip(first.silo_indices, again.silo_indices, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first.silo_indices, other.silo_indices, strict=True))


def test_iid_sizes_differ_by_at_most_one() -> None:
    silos = partition(labelled([33, 34]), kind="iid", num_silos=6, seed=0)
    assert sorted(silos.sizes.tolist()) == [11, 11, 11, 11, 11, 12]


def test_shards_give_at_most_two_labels_per_silo(mnist: Dataset) -> None:
    for num_silos in (100, 25):
        silos = partition(mnist, kind="shards", num_silos=num_silos, seed=3, labels_per_silo=2)
        histogram = silos.label_histogram()
        assert (histogram > 0).sum(axis=1).max() <= 2
    # McMahan et al.'s setting: 200 shards of about 300 records.
    sizes = partition(mnist, kind="shards", num_silos=100, seed=3, labels_per_silo=2).sizes
    assert sizes.min() >= 580 and sizes.max() <= 620


def test_label_sets_give_every_silo_exactly_its_labels(mnist: Dataset) -> None:
    """The voting paper's split: 100 agents of about 600 points, each from exactly 6 digits,
    where shards of 6 dealt at random give 4.8 distinct digits on average."""
    for seed in (0, 1):
        silos = partition(mnist, kind="label_sets", num_silos=100, seed=seed, labels_per_silo=6)
        histogram = silos.label_histogram()
        assert ((histogram > 0).sum(axis=1) == 6).all()
        assert silos.sizes.min() >= 595 and silos.sizes.max() <= 605
        # each class is spread evenly over its silos: its shares differ by at most one record
        for c in range(10):
            shares = histogram[:, c][histogram[:, c] > 0]
            assert shares.max() - shares.min() <= 1
    shards = partition(mnist, kind="shards", num_silos=100, seed=0, labels_per_silo=6).label_histogram()
    assert (shards > 0).sum(axis=1).mean() == pytest.approx(4.81, abs=0.01)


def test_label_sets_on_small_data_and_their_limits() -> None:
    data = labelled([40, 30, 20, 10])
    silos = partition(data, kind="label_sets", num_silos=3, seed=0, labels_per_silo=3)
    assert ((silos.label_histogram() > 0).sum(axis=1) == 3).all()
    with pytest.raises(SpecError, match=re.escape("must be an integer from 1 to the 4 classes; got 5.")):
        partition(data, kind="label_sets", num_silos=3, seed=0, labels_per_silo=5)
    with pytest.raises(SpecError, match=re.escape("3 x 1 = 3 slots is fewer than the classes")):
        partition(data, kind="label_sets", num_silos=3, seed=0, labels_per_silo=1)


def test_pairs_reproduce_the_isrl_dp_digit_pairs(mnist: Dataset) -> None:
    histogram = partition(mnist, kind="pairs", num_silos=25, seed=0).label_histogram()
    pairs = [tuple(np.flatnonzero(row).tolist()) for row in histogram]
    # reference/000_isrl_dp.md §6.2: one silo per (even, odd) digit pair, 25 in all; silo
    # 5i + j holds digits 2i and 2j + 1.
    assert pairs == [tuple(sorted((even, odd))) for even in (0, 2, 4, 6, 8) for odd in (1, 3, 5, 7, 9)]
    # Each digit is divided evenly over its 5 silos: 5923 zeros -> 1184 or 1185 per silo.
    assert histogram[:, 0][histogram[:, 0] > 0].tolist() == [1185, 1185, 1184, 1185, 1184]
    nonzero = np.where(histogram > 0, histogram, np.nan)
    assert np.all(np.nanmax(nonzero, axis=0) - np.nanmin(nonzero, axis=0) <= 1)


def test_pairs_need_the_right_number_of_silos(mnist: Dataset) -> None:
    expected = "must be 25 for kind 'pairs' on 10 classes (5 even x 5 odd); got 10."
    with pytest.raises(SpecError, match=re.escape(expected)):
        partition(mnist, kind="pairs", num_silos=10, seed=0)


def test_dirichlet_small_alpha_still_fills_every_silo(mnist: Dataset) -> None:
    silos = partition(mnist, kind="dirichlet", num_silos=100, seed=0, alpha=0.01)
    assert silos.sizes.min() >= 1 and silos.sizes.sum() == 60000
    # Small α concentrates each silo on few classes.
    assert np.median((silos.label_histogram() > 0).sum(axis=1)) <= 2


def test_dirichlet_large_alpha_is_nearly_iid(mnist: Dataset) -> None:
    histogram = partition(mnist, kind="dirichlet", num_silos=10, seed=0, alpha=1000.0).label_histogram()
    shares = histogram / histogram.sum(axis=1, keepdims=True)
    expected = np.array(MNIST_CLASS_COUNTS) / 60000
    assert np.abs(shares - expected).max() < 0.02


def test_quantity_skews_sizes_but_not_labels(mnist: Dataset) -> None:
    silos = partition(mnist, kind="quantity", num_silos=10, seed=0, alpha=0.5)
    assert silos.sizes.max() > 3 * silos.sizes.min()
    big = int(np.argmax(silos.sizes))
    shares = silos.label_histogram()[big] / silos.sizes[big]
    assert np.abs(shares - np.array(MNIST_CLASS_COUNTS) / 60000).max() < 0.02


def test_natural_needs_natural_silos(mnist: Dataset) -> None:
    with pytest.raises(SpecError) as caught:
        partition(mnist, kind="natural", num_silos=4, seed=0)
    assert str(caught.value) == (
        "`dataset.partition.kind` 'natural' needs a dataset with natural silos; "
        "'mnist' has none. Use one of: dirichlet, iid, label_sets, pairs, quantity, shards."
    )


def test_natural_needs_the_matching_silo_count() -> None:
    data = labelled([3, 3], silos=[0, 1, 2, 0, 1, 2])
    expected = "`dataset.silos` must be 3, the number of natural silos"
    with pytest.raises(SpecError, match=re.escape(expected)):
        partition(data, kind="natural", num_silos=4, seed=0)


def test_bad_alpha_message() -> None:
    with pytest.raises(SpecError) as caught:
        partition(labelled([5, 5]), kind="dirichlet", num_silos=2, seed=0, alpha=-1)
    assert str(caught.value) == "`dataset.partition.alpha` must be > 0; got -1."
    assert caught.value.field == "dataset.partition.alpha"


def test_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(UnknownNameError, match="unknown partition kind 'random'; registered: dirichlet, iid"):
        partition(labelled([5, 5]), kind="random", num_silos=2, seed=0)


def test_unknown_option_is_refused() -> None:
    expected = "`dataset.partition.alpha` is not an option of partition kind 'iid'"
    with pytest.raises(SpecError, match=re.escape(expected)):
        partition(labelled([5, 5]), kind="iid", num_silos=2, seed=0, alpha=1.0)


def test_more_silos_than_records_is_refused() -> None:
    expected = "`dataset.silos` must be <= the 10 training records"
    with pytest.raises(SpecError, match=re.escape(expected)):
        partition(labelled([5, 5]), kind="iid", num_silos=11, seed=0)

"""Users across silos (ULDP-FL allocation rules, reference/004_uldp_fl.md §4.3)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dpfl.data import Dataset, UserAllocation, partition, user_kinds, users
from dpfl.data.users import _seat
from dpfl.errors import SpecError
from tests.dpfl.data.factories import labelled


def _check_shape(allocation: UserAllocation, sizes: np.ndarray) -> None:
    assert [len(ids) for ids in allocation.user_ids] == sizes.tolist()
    counts = allocation.counts()
    assert counts.shape == (len(sizes), allocation.num_users)
    np.testing.assert_array_equal(counts.sum(axis=1), sizes)


@pytest.mark.parametrize("kind", user_kinds())
def test_every_record_gets_one_user_and_silos_keep_their_size(heart: Dataset, kind: str) -> None:
    silos = partition(heart, kind="natural", num_silos=4, seed=0)
    allocation = users(silos, num_users=50, kind=kind, seed=0)
    _check_shape(allocation, silos.sizes)
    again = users(silos, num_users=50, kind=kind, seed=0)
    other = users(silos, num_users=50, kind=kind, seed=1)
    np.testing.assert_array_equal(allocation.counts(), again.counts())
    assert not np.array_equal(allocation.counts(), other.counts())


def test_users_span_silos(heart: Dataset) -> None:
    silos = partition(heart, kind="natural", num_silos=4, seed=0)
    counts = users(silos, num_users=50, kind="uniform", seed=0).counts()
    # With 486 records over 50 users, almost every user holds records in several hospitals.
    assert ((counts > 0).sum(axis=0) >= 2).mean() > 0.9


def test_balanced_users_hold_equal_counts(mnist: Dataset) -> None:
    silos = partition(mnist, kind="iid", num_silos=5, seed=0)
    per_user = users(silos, num_users=100, kind="balanced", seed=0).records_per_user()
    assert per_user.min() == per_user.max() == 600


def test_zipf_gives_every_user_a_record_and_skews_counts(mnist: Dataset) -> None:
    silos = partition(mnist, kind="iid", num_silos=5, seed=0)
    allocation = users(silos, num_users=100, kind="zipf", seed=0)
    _check_shape(allocation, silos.sizes)
    per_user = allocation.records_per_user()
    assert per_user.min() >= 1 and per_user.sum() == 60000
    # N_u = 1 + Multinomial(59,900, p) with p_u ∝ (u + 1)^-0.5: user 0 expects about 3,230
    # records, user 99 about 320. Each count is within 5 binomial standard deviations.
    weights = np.arange(1, 101) ** -0.5
    p = weights / weights.sum()
    expected = 1 + 59900 * p
    assert np.all(np.abs(per_user - expected) <= 5 * np.sqrt(59900 * p * (1 - p)))
    assert per_user[:10].sum() > 3 * per_user[-10:].sum()


def test_zipf_concentrates_each_user_on_a_main_silo(mnist: Dataset) -> None:
    silos = partition(mnist, kind="iid", num_silos=5, seed=0)
    counts = users(silos, num_users=1000, kind="zipf", seed=0).counts()
    # 80% of a user's records go to its main silo, the rest to the 4 others.
    main_share = counts.max(axis=0).sum() / counts.sum()
    assert main_share == pytest.approx(0.8, abs=0.05)


def test_zipf_overflow_moves_to_the_next_silo() -> None:
    # Two silos of 5 records; whichever silo users prefer, no silo ends over its size.
    silos = partition(labelled([6, 4]), kind="iid", num_silos=2, seed=0)
    allocation = users(silos, num_users=3, kind="zipf", seed=0, main_silo_probability=1.0)
    _check_shape(allocation, silos.sizes)
    # Where the overflow goes: records claim seats in order; the sixth that wants silo 0 of 5
    # seats takes silo 1, and a full last silo wraps round to silo 0.
    wanted = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    assert _seat(wanted, np.array([5, 5])).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert _seat(np.ones(10, dtype=np.int64), np.array([5, 5])).tolist() == [1] * 5 + [0] * 5
    assert _seat(np.zeros(6, dtype=np.int64), np.array([2, 1, 3])).tolist() == [0, 0, 1, 2, 2, 2]


def test_zipf_needs_a_record_per_user() -> None:
    silos = partition(labelled([3, 3]), kind="iid", num_silos=2, seed=0)
    with pytest.raises(SpecError) as caught:
        users(silos, num_users=7, kind="zipf", seed=0)
    assert str(caught.value) == (
        "`dataset.users.num_users` must be <= the 6 records for kind 'zipf' "
        "(every user gets one record first); got 7."
    )


def test_unknown_kind_is_refused() -> None:
    silos = partition(labelled([3, 3]), kind="iid", num_silos=2, seed=0)
    expected = "`dataset.users.kind` must be one of balanced, uniform, zipf; got 'pareto'."
    with pytest.raises(SpecError, match=re.escape(expected)):
        users(silos, num_users=2, kind="pareto", seed=0)

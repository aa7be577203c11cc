"""Users across silos: which user owns each training record of each silo (user-level DP).

In ULDP-FL (Kato et al., reference/004_uldp_fl.md §1.1) every record belongs to one user of
a global user set, and a user may hold records in several silos. ``users`` allocates the
records of an existing ``Partition`` to users, keeping every silo's records and size as they
are; the allocation rules are those of the paper's code for silos fixed in advance
(``flamby_utils/*.py::build_user_dist``, reference §4.3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.data.partition import Partition
from dpfl.data.preprocessing import rng_for
from dpfl.errors import SpecError
from dpfl.registry import Registry

__all__ = ["USER_KINDS", "UserAllocation", "UserKind", "natural_users", "user_kinds", "users", "users_first"]


@dataclass(frozen=True)
class UserKind:
    """An allocation rule: how records get their users (`dataset.users.kind`).

    Attributes:
        description: one line for the form.
        options: the `dataset.users.<option>` fields the rule takes (the spec refuses others).
        within_silos: ``(sizes, num_users, rng, *, zipf_alpha, main_silo_probability)`` → the
            user of every record, silo by silo, when the partition fixed the silos (`users`).
        before_silos: ``(total, num_users, rng, *, zipf_alpha)`` → the user of every record,
            before users' records are dealt to silos (`users_first`).
        None for both: the dataset's own user column decides (`natural_users`).
    """

    description: str
    options: tuple[str, ...]
    within_silos: Callable[..., np.ndarray] | None = None
    before_silos: Callable[..., np.ndarray] | None = None


USER_KINDS: Registry[UserKind] = Registry("user kind", field="dataset.users.kind")
"""Every allocation rule, by name: ``USER_KINDS.add("uniform", UserKind(...))``."""


@dataclass(frozen=True, eq=False)
class UserAllocation:
    """The user of every record of every silo.

    Attributes:
        user_ids: one ``int64`` array per silo, aligned with ``partition.silo_indices``:
            ``user_ids[s][j]`` owns training record ``partition.silo_indices[s][j]``.
        num_users: size of the global user set; ids lie in ``[0, num_users)``. A user may
            hold no record.
        kind: the allocation rule that produced it.
    """

    user_ids: list[np.ndarray]
    num_users: int
    kind: str

    def counts(self) -> np.ndarray:
        """Returns ``n_{s,u}``, the records of user u in silo s, ``int64 [num_silos, num_users]``."""
        rows = [np.bincount(ids, minlength=self.num_users) for ids in self.user_ids]
        return np.stack(rows).astype(np.int64)

    def records_per_user(self) -> np.ndarray:
        """Returns ``N_u = Σ_s n_{s,u}``, ``int64 [num_users]``."""
        return self.counts().sum(axis=0)

    def summary(self) -> dict[str, Any]:
        """Returns the distribution the dashboard draws: records per user and silos per user.

        ``records_per_user`` lists N_u for every user (ids in order); ``silos_per_user[k]`` is
        the number of users with records in exactly k silos (k = 0..S); ``users_per_silo``
        counts the users present in each silo.
        """
        counts = self.counts()
        present = counts > 0
        return {
            "kind": self.kind,
            "num_users": self.num_users,
            "records_per_user": counts.sum(axis=0).tolist(),
            "silos_per_user": np.bincount(present.sum(axis=0), minlength=len(counts) + 1).tolist(),
            "users_per_silo": present.sum(axis=1).tolist(),
        }

    def capped(self, k: int) -> list[np.ndarray]:
        """Returns, per silo, which records to keep so that every user keeps at most k in total.

        Records are taken round-robin over the silos where the user has records, one at a
        time, user u starting at silo u mod S (ULDP-GROUP-k's flags, reference §2.3; the
        authors' cursor carries over from one user to the next, here it rotates with u so the
        choice is one vectorised sort). A user with at most k records keeps them all.
        """
        num_silos = len(self.user_ids)
        silo = np.concatenate([np.full(len(ids), s) for s, ids in enumerate(self.user_ids)]).astype(np.int64)
        user = np.concatenate(self.user_ids) if self.user_ids else np.zeros(0, np.int64)
        # j: the record's position among its user's records in its silo (0, 1, ...).
        order = np.lexsort((np.arange(len(user)), silo, user))
        pair = user[order] * num_silos + silo[order]
        first = np.r_[0, np.flatnonzero(np.diff(pair)) + 1]
        j = np.empty(len(user), dtype=np.int64)
        j[order] = np.arange(len(user)) - np.repeat(first, np.diff(np.r_[first, len(user)]))
        turn = (silo - user) % num_silos
        # Rank of each record in its user's round-robin order: by j, then by the silo's turn.
        rank_order = np.lexsort((turn, j, user))
        users_sorted = user[rank_order]
        starts = np.searchsorted(users_sorted, users_sorted, side="left")
        rank = np.empty(len(user), dtype=np.int64)
        rank[rank_order] = np.arange(len(user)) - starts
        keep = rank < k
        return np.split(keep, np.cumsum([len(ids) for ids in self.user_ids])[:-1])


def user_kinds() -> list[str]:
    """Returns the allocation rules ``users`` accepts (every kind but ``natural``)."""
    return [name for name in USER_KINDS.names() if USER_KINDS[name].within_silos is not None]


def users(
    partition: Partition,
    *,
    num_users: int,
    kind: str = "uniform",
    seed: int,
    zipf_alpha: float = 0.5,
    main_silo_probability: float = 0.8,
) -> UserAllocation:
    """Returns an allocation of every record of ``partition`` to one of ``num_users`` users.

    Rules (reference/004_uldp_fl.md §4.3):

    - ``uniform``: each record's user is drawn uniformly, independently (the paper's rule for
      HeartDisease / TcgaBrca; "each record is assigned to a user with equal probability").
    - ``balanced``: every user gets the same number of records, ±1, at random positions (the
      paper's "uniform" for MNIST and Creditcard, a permutation of repeated user ids).
    - ``zipf``: every user first gets one record; the other ``n - U`` go to users by a
      bounded Zipf law, user u (rank u + 1) with probability ∝ (u + 1)^-``zipf_alpha``. Each
      user draws a main silo uniformly; each of its records goes there with probability
      ``main_silo_probability``, else to one of the other silos uniformly. A record whose silo
      is full moves on to the next silo (s + 1 mod S), as in the paper's code.

    Args:
        partition: the silos; their sizes and records are kept.
        num_users: size of the global user set, >= 1 (``zipf``: at most the number of records).
        kind: ``uniform``, ``balanced`` or ``zipf``.
        seed: seed, >= 0; the same arguments give the same allocation.
        zipf_alpha: Zipf exponent α_user >= 0 (paper: 0.5).
        main_silo_probability: share of a user's records on its main silo, in [0, 1] (paper: 0.8).

    Raises:
        SpecError: an argument is out of range (field ``dataset.users.<name>``).
    """
    sizes = partition.sizes
    rule = _allocated(kind, "within_silos")
    for field, value, minimum in (("num_users", num_users, 1), ("seed", seed, 0)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
            raise SpecError(f"dataset.users.{field}", f"must be an integer >= {minimum}; got {value!r}.")
    rng = rng_for(seed, f"users/{kind}")
    flat = rule(sizes, num_users, rng, zipf_alpha=zipf_alpha, main_silo_probability=main_silo_probability)
    ids = [part.astype(np.int64) for part in np.split(flat, np.cumsum(sizes)[:-1])]
    return UserAllocation(user_ids=ids, num_users=int(num_users), kind=kind)


def natural_users(dataset: Dataset, partition: Partition) -> UserAllocation:
    """Returns the allocation given by the dataset's own user column (``dataset.user_train``).

    Raises:
        SpecError: the dataset has no user ids.
    """
    if dataset.user_train is None:
        raise SpecError(
            "dataset.users.kind",
            f"is 'natural', but dataset {dataset.name!r} has no user ids; allocate users with another "
            "kind (uniform, zipf), or upload a CSV with a user-id column.",
        )
    ids = [dataset.user_train[rows] for rows in partition.silo_indices]
    return UserAllocation(user_ids=ids, num_users=int(dataset.user_train.max()) + 1, kind="natural")


def _allocated(kind: str, step: str) -> Callable[..., np.ndarray]:
    """Returns the kind's rule for `step` (``within_silos`` or ``before_silos``), or refuses the kind."""
    rule = getattr(USER_KINDS[kind], step) if kind in USER_KINDS else None
    if rule is None:
        raise SpecError("dataset.users.kind", f"must be one of {', '.join(user_kinds())}; got {kind!r}.")
    return rule


def _uniform_users(total: int, num_users: int, rng: np.random.Generator, **_: object) -> np.ndarray:
    return rng.integers(num_users, size=total)


def _balanced_users(total: int, num_users: int, rng: np.random.Generator, **_: object) -> np.ndarray:
    return rng.permutation(np.arange(total) % num_users)


def _zipf_users(total: int, num_users: int, rng: np.random.Generator, *, zipf_alpha: float) -> np.ndarray:
    weights = np.arange(1, num_users + 1, dtype=np.float64) ** -float(zipf_alpha)
    return rng.choice(num_users, size=total, p=weights / weights.sum())


def _zipf(
    sizes: np.ndarray,
    num_users: int,
    rng: np.random.Generator,
    *,
    zipf_alpha: float,
    main_silo_probability: float,
) -> np.ndarray:
    """Returns the user of every record, silo by silo (silo 0's records first)."""
    total, num_silos = int(sizes.sum()), len(sizes)
    if num_users > total:
        raise SpecError(
            "dataset.users.num_users",
            f"must be <= the {total} records for kind 'zipf' "
            f"(every user gets one record first); got {num_users}.",
        )
    number = isinstance(zipf_alpha, int | float | np.number) and not isinstance(zipf_alpha, bool)
    if not number or not 0 <= zipf_alpha < np.inf:
        raise SpecError("dataset.users.zipf_alpha", f"must be a number >= 0; got {zipf_alpha!r}.")
    if not isinstance(main_silo_probability, int | float | np.number) or not 0 <= main_silo_probability <= 1:
        raise SpecError(
            "dataset.users.main_silo_probability", f"must be in [0, 1]; got {main_silo_probability!r}."
        )
    weights = np.arange(1, num_users + 1, dtype=np.float64) ** -float(zipf_alpha)
    per_user = 1 + rng.multinomial(total - num_users, weights / weights.sum())
    # One entry per record, in random order: the order is each record's priority for a seat.
    owner = rng.permutation(np.repeat(np.arange(num_users), per_user))
    main = rng.integers(num_silos, size=num_users)[owner]
    stray = rng.random(total) >= main_silo_probability
    other = (main + rng.integers(1, max(num_silos, 2), size=total)) % num_silos
    wanted = np.where(stray & (num_silos > 1), other, main)
    silo = _seat(wanted, sizes)
    # Sorting by silo (stable) keeps the random order inside each silo.
    return owner[np.argsort(silo, kind="stable")]


def _seat(wanted: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Returns each record's silo: its wanted silo if a seat is left, else the next silo with one.

    Records claim seats in array order. A record refused by a full silo tries s + 1 (mod S)
    in the next pass; every pass seats at least one record or moves all of them one silo on,
    and the seats equal the records, so it ends within a few passes over the silos.
    """
    num_silos = len(capacity)
    free = capacity.astype(np.int64).copy()
    silo = np.full(len(wanted), -1, dtype=np.int64)
    wanted = wanted.copy()
    while (waiting := np.flatnonzero(silo < 0)).size:
        order = waiting[np.argsort(wanted[waiting], kind="stable")]
        target = wanted[order]
        starts = np.searchsorted(target, np.arange(num_silos))
        rank = np.arange(len(order)) - starts[target]
        seated = rank < free[target]
        silo[order[seated]] = target[seated]
        free -= np.bincount(target[seated], minlength=num_silos)
        wanted[order[~seated]] = (target[~seated] + 1) % num_silos
    return silo


def users_first(
    partition_labels: np.ndarray,
    num_classes: int,
    *,
    num_silos: int,
    num_users: int,
    kind: str,
    seed: int,
    zipf_alpha: float = 0.5,
    silo_alpha: float = 2.0,
) -> tuple[Partition, UserAllocation]:
    """Returns silos and users when users come first (the paper's MNIST/Creditcard rule, §4.3).

    Every record first gets a user: ``uniform`` (uniform draw), ``balanced`` (equal counts,
    a permutation of repeated ids) or ``zipf`` (user of rank r with probability ∝ r^-zipf_alpha,
    independently per record). Then each user draws a random order of the silos and each of
    its records goes independently to the silo of rank j with probability ∝ j^-silo_alpha
    (0 gives uniform silos).

    Args:
        partition_labels: the training labels (one per record).
        num_classes: number of classes.
    """
    total = len(partition_labels)
    rule = _allocated(kind, "before_silos")
    rng = rng_for(seed, f"users-first/{kind}")
    owner = rule(total, num_users, rng, zipf_alpha=zipf_alpha)
    silo_order = rng.permuted(np.tile(np.arange(num_silos), (num_users, 1)), axis=1)
    rank_weights = np.arange(1, num_silos + 1, dtype=np.float64) ** -float(silo_alpha)
    rank = rng.choice(num_silos, size=total, p=rank_weights / rank_weights.sum())
    silo = silo_order[owner, rank]
    indices = [np.flatnonzero(silo == s).astype(np.int64) for s in range(num_silos)]
    split = Partition(silo_indices=indices, labels=partition_labels, num_classes=num_classes, kind="users")
    ids = [owner[rows].astype(np.int64) for rows in indices]
    return split, UserAllocation(user_ids=ids, num_users=int(num_users), kind=kind)


def _whole(draw: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Returns `draw` as a within-silos rule: records drawn independently of their silo."""
    return lambda sizes, num_users, rng, **options: draw(int(sizes.sum()), num_users, rng, **options)


USER_KINDS.add(
    "uniform",
    UserKind(
        "each record's user drawn uniformly among `count` users",
        ("count", "silo_alpha"),
        _whole(_uniform_users),
        _uniform_users,
    ),
)
USER_KINDS.add(
    "balanced",
    UserKind(
        "equal records per user, `count` users",
        ("count", "silo_alpha"),
        _whole(_balanced_users),
        _balanced_users,
    ),
)
USER_KINDS.add(
    "zipf",
    UserKind(
        "records per user ∝ rank^-zipf_alpha, `count` users",
        ("count", "zipf_alpha", "silo_alpha", "main_silo_probability"),
        _zipf,
        _zipf_users,
    ),
)
USER_KINDS.add("natural", UserKind("the dataset's own user column (no `count`)", ()))

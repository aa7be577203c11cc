"""The partition kinds, registered by name: each maps every training record to a silo.

A kind is a function ``split(dataset, num_silos, rng, *, <options>) -> int64 [num_train]``
returning the silo of every training record. It may assume ``1 <= num_silos <= num_train``
(``partition`` checks that) and must validate its own options. Every step is vectorised
over records; the only loops run over classes or silos.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpfl.data.dataset import Dataset
from dpfl.errors import SpecError
from dpfl.registry import Registry

__all__ = ["KINDS"]

Split = Callable[..., np.ndarray]
KINDS: Registry[Split] = Registry("partition kind", field="dataset.partition.kind")
"""Every partition kind, by name: ``@KINDS.register("iid")`` above the split function registers it."""
_MAX_DRAWS = 100


@KINDS.register("iid")
def _iid(dataset: Dataset, num_silos: int, rng: np.random.Generator) -> np.ndarray:
    """Uniformly random split; silo sizes differ by at most one."""
    silo = np.empty(dataset.num_train, dtype=np.int64)
    silo[rng.permutation(dataset.num_train)] = np.arange(dataset.num_train) % num_silos
    return silo


@KINDS.register("dirichlet")
def _dirichlet(
    dataset: Dataset, num_silos: int, rng: np.random.Generator, *, alpha: float = 0.5, min_size: int = 1
) -> np.ndarray:
    """Label skew of Hsu, Qi & Brown 2019 ("Measuring the effects of non-identical data ...").

    For each class c, proportions ``p_c ~ Dirichlet(α·1_S)`` over the S silos; the class's
    records, in random order, are cut at ``floor(cumsum(p_c) · n_c)``. Small α gives each
    silo few classes; large α approaches an i.i.d. split. Draws are repeated (up to 100
    times, as FedML and NIID-Bench do) until every silo holds ``min_size`` records; if that
    never happens, the largest silos each give one record of their largest class to the
    smallest silo until it does.
    """
    _check_alpha(alpha)
    _check_min_size(min_size, num_silos, dataset.num_train)
    class_sizes = np.bincount(dataset.y_train, minlength=dataset.num_classes)
    for _ in range(_MAX_DRAWS):
        shares = rng.dirichlet(np.full(num_silos, float(alpha)), size=dataset.num_classes)
        cuts = np.floor(np.cumsum(shares, axis=1) * class_sizes[:, None]).astype(np.int64)
        cuts[:, -1] = class_sizes  # the last silo takes the rounding remainder
        counts = np.diff(cuts, axis=1, prepend=0)  # [num_classes, num_silos]
        if counts.sum(axis=0).min() >= min_size:
            break
    else:
        counts = _repair_counts(counts, min_size)
    # Records sorted by (class, random key); each class block is dealt out by its counts.
    order = np.lexsort((rng.random(dataset.num_train), dataset.y_train))
    silo = np.empty(dataset.num_train, dtype=np.int64)
    silo[order] = np.repeat(np.tile(np.arange(num_silos), dataset.num_classes), counts.ravel())
    return silo


@KINDS.register("quantity")
def _quantity(
    dataset: Dataset, num_silos: int, rng: np.random.Generator, *, alpha: float = 0.5, min_size: int = 1
) -> np.ndarray:
    """Quantity skew (Li et al. 2022, NIID-Bench §4.2): sizes ``n·q`` with ``q ~ Dirichlet(α·1_S)``.

    Sizes are rounded by largest remainder; silos below ``min_size`` are topped up from the
    largest silos. Which records go where is uniformly random, so labels stay i.i.d.
    """
    _check_alpha(alpha)
    _check_min_size(min_size, num_silos, dataset.num_train)
    shares = rng.dirichlet(np.full(num_silos, float(alpha)))
    raw = shares * dataset.num_train
    sizes = np.floor(raw).astype(np.int64)
    remainder_order = np.argsort(-(raw - sizes), kind="stable")
    sizes[remainder_order[: dataset.num_train - sizes.sum()]] += 1
    sizes = _repair_counts(sizes[None, :], min_size)[0]
    silo = np.empty(dataset.num_train, dtype=np.int64)
    silo[rng.permutation(dataset.num_train)] = np.repeat(np.arange(num_silos), sizes)
    return silo


@KINDS.register("shards")
def _shards(
    dataset: Dataset, num_silos: int, rng: np.random.Generator, *, labels_per_silo: int = 2
) -> np.ndarray:
    """Pathological label skew of McMahan et al. 2017 (FedAvg, §3): each silo gets L shards.

    The training set is cut into ``S·L`` shards that each hold one class only: class c gets
    ``k_c >= 1`` shards, ``k_c`` proportional to its size (largest remainder), and its records,
    in random order, are divided into ``k_c`` near-equal shards. The shards are then dealt to
    the silos at random, L each. A silo therefore sees at most L distinct labels (fewer if
    two of its shards share a class). McMahan's MNIST setting is S = 100, L = 2.
    """
    if (
        not isinstance(labels_per_silo, int | np.integer)
        or isinstance(labels_per_silo, bool)
        or labels_per_silo < 1
    ):
        raise SpecError(
            "dataset.partition.labels_per_silo", f"must be an integer >= 1; got {labels_per_silo!r}."
        )
    class_sizes = np.bincount(dataset.y_train, minlength=dataset.num_classes)
    present = class_sizes > 0
    num_shards = num_silos * labels_per_silo
    if num_shards < present.sum() or num_shards > dataset.num_train:
        raise SpecError(
            "dataset.partition.labels_per_silo",
            f"must make num_silos x labels_per_silo between the {present.sum()} classes and the "
            f"{dataset.num_train} records; got {num_silos} x {labels_per_silo} = {num_shards}.",
        )
    extra = (num_shards - present.sum()) * class_sizes / dataset.num_train
    per_class = present.astype(np.int64) + np.floor(extra).astype(np.int64)
    short = num_shards - per_class.sum()
    per_class[np.argsort(-(extra - np.floor(extra)), kind="stable")[:short]] += 1
    per_class = np.minimum(per_class, class_sizes)  # a shard is never empty
    while (missing := num_shards - per_class.sum()) > 0:  # at most num_classes passes
        roomiest = int(np.argmax(class_sizes - per_class))
        per_class[roomiest] += min(missing, class_sizes[roomiest] - per_class[roomiest])
    # Rank of each record inside its class (random order), mapped to a shard of its class.
    order = np.lexsort((rng.random(dataset.num_train), dataset.y_train))
    starts = np.cumsum(class_sizes) - class_sizes
    sorted_labels = dataset.y_train[order]
    rank = np.arange(dataset.num_train) - starts[sorted_labels]
    local = rank * per_class[sorted_labels] // class_sizes[sorted_labels]
    shard = np.empty(dataset.num_train, dtype=np.int64)
    shard[order] = (np.cumsum(per_class) - per_class)[sorted_labels] + local
    owner = np.empty(num_shards, dtype=np.int64)
    owner[rng.permutation(num_shards)] = np.arange(num_shards) // labels_per_silo
    return owner[shard]


@KINDS.register("label_sets")
def _label_sets(
    dataset: Dataset, num_silos: int, rng: np.random.Generator, *, labels_per_silo: int = 6
) -> np.ndarray:
    """Each silo holds exactly L distinct labels, as the voting paper splits MNIST (100 agents,
    600 points each "from 6 digits only", reference/003_voting_dpfl.md §4.1).

    There are S·L (silo, label) slots. Class c gets k_c of them, proportional to its size
    (largest remainder, 1 ≤ k_c ≤ S), and its records, in random order, are divided evenly
    among its slots. The slots, listed class by class in a random class order, are dealt to
    the silos round-robin, so a class's k_c ≤ S consecutive slots fall in k_c different silos;
    the silos are then permuted at random. Unlike ``shards`` (L single-label shards dealt at
    random, so fewer distinct labels when two shards share one), no silo ever repeats a label.
    """
    field = "dataset.partition.labels_per_silo"
    class_sizes = np.bincount(dataset.y_train, minlength=dataset.num_classes)
    present = np.flatnonzero(class_sizes)
    if (
        not isinstance(labels_per_silo, int | np.integer)
        or isinstance(labels_per_silo, bool)
        or not 1 <= labels_per_silo <= len(present)
    ):
        raise SpecError(
            field, f"must be an integer from 1 to the {len(present)} classes; got {labels_per_silo!r}."
        )
    slots = num_silos * labels_per_silo
    if slots < len(present):
        raise SpecError(
            field,
            f"must give every one of the {len(present)} classes a silo: num_silos x labels_per_silo = "
            f"{num_silos} x {labels_per_silo} = {slots} slots is fewer than the classes.",
        )
    sizes = class_sizes[present]
    share = slots * sizes / sizes.sum()
    per_class = np.clip(np.floor(share).astype(np.int64), 1, num_silos)
    while (gap := slots - per_class.sum()) != 0:  # largest remainders first, within 1 ≤ k_c ≤ S
        room = (per_class < num_silos) if gap > 0 else (per_class > 1)
        score = np.where(room, share - per_class if gap > 0 else per_class - share, -np.inf)
        per_class[int(np.argmax(score))] += 1 if gap > 0 else -1
    if np.any(per_class > sizes):
        raise SpecError(field, "gives some class more silos than records; use fewer silos or labels.")
    listed = rng.permutation(len(present))  # the order the classes' slots are listed in
    slot_silo = rng.permutation(num_silos)[np.arange(slots) % num_silos]
    # each class's slots, in the order listed; its records (random order) split evenly over them
    first_slot = np.zeros(dataset.num_classes, dtype=np.int64)
    first_slot[present[listed]] = np.cumsum(per_class[listed]) - per_class[listed]
    k = np.zeros(dataset.num_classes, dtype=np.int64)
    k[present] = per_class
    order = np.lexsort((rng.random(dataset.num_train), dataset.y_train))
    sorted_labels = dataset.y_train[order]
    rank = np.arange(dataset.num_train) - (np.cumsum(class_sizes) - class_sizes)[sorted_labels]
    slot = first_slot[sorted_labels] + rank * k[sorted_labels] // class_sizes[sorted_labels]
    silo = np.empty(dataset.num_train, dtype=np.int64)
    silo[order] = slot_silo[slot]
    return silo


@KINDS.register("pairs")
def _pairs(dataset: Dataset, num_silos: int, rng: np.random.Generator) -> np.ndarray:
    """One silo per (even class, odd class) pair, as the ISRL-DP paper splits MNIST.

    Lowy et al. (reference/000_isrl_dp.md §6.2, §9.2) build N = 25 silos, one per digit pair
    in {0,2,4,6,8} x {1,3,5,7,9}. With E even and O odd classes, silo ``i·O + j`` holds the
    pair (class 2i, class 2j+1). Each class's records, in random order, are divided evenly
    among the silos that contain it, so every record is in exactly one silo. The paper's code
    instead reuses the same 774 images of a digit in all 5 of its silos and samples each silo
    with replacement; that duplicates records within and across silos, which this kind avoids.
    ``num_silos`` must be E·O (25 for 10 classes).
    """
    num_even = (dataset.num_classes + 1) // 2
    num_odd = dataset.num_classes // 2
    if num_silos != num_even * num_odd:
        raise SpecError(
            "dataset.silos",
            f"must be {num_even * num_odd} for kind 'pairs' on {dataset.num_classes} classes "
            f"({num_even} even x {num_odd} odd); got {num_silos}.",
        )
    order = np.lexsort((rng.random(dataset.num_train), dataset.y_train))
    sorted_labels = dataset.y_train[order]
    class_sizes = np.bincount(dataset.y_train, minlength=dataset.num_classes)
    rank = np.arange(dataset.num_train) - (np.cumsum(class_sizes) - class_sizes)[sorted_labels]
    position = sorted_labels // 2
    is_even = sorted_labels % 2 == 0
    partners = np.where(is_even, num_odd, num_even)
    # Block-wise rather than round-robin, so each partner silo gets a contiguous random slice.
    partner = rank * partners // class_sizes[sorted_labels]
    silo = np.empty(dataset.num_train, dtype=np.int64)
    silo[order] = np.where(is_even, position * num_odd + partner, partner * num_odd + position)
    return silo


@KINDS.register("natural")
def _natural(dataset: Dataset, num_silos: int, rng: np.random.Generator) -> np.ndarray:
    """The dataset's own silos (``dataset.silo_train``), e.g. the 4 hospitals of ``heart``."""
    if dataset.silo_train is None:
        others = ", ".join(sorted(set(KINDS.names()) - {"natural"}))
        raise SpecError(
            "dataset.partition.kind",
            f"'natural' needs a dataset with natural silos; {dataset.name!r} has none. Use one of: {others}.",
        )
    if num_silos != dataset.num_silos:
        raise SpecError(
            "dataset.silos",
            f"must be {dataset.num_silos}, the number of natural silos of {dataset.name!r}; got {num_silos}.",
        )
    return dataset.silo_train.copy()


def _check_alpha(alpha: object) -> None:
    if not isinstance(alpha, int | float | np.number) or isinstance(alpha, bool) or not 0 < alpha < np.inf:
        raise SpecError("dataset.partition.alpha", f"must be > 0; got {alpha!r}.")


def _check_min_size(min_size: object, num_silos: int, num_train: int) -> None:
    if (
        not isinstance(min_size, int | np.integer)
        or isinstance(min_size, bool)
        or min_size < 0
        or min_size * num_silos > num_train
    ):
        raise SpecError(
            "dataset.partition.min_size",
            f"must be an integer in [0, {num_train // num_silos}] "
            f"({num_train} records over {num_silos} silos); got {min_size!r}.",
        )


def _repair_counts(counts: np.ndarray, min_size: int) -> np.ndarray:
    """Returns ``counts [classes, silos]`` with every silo total >= ``min_size``, moving records
    one at a time from the silo with the most records (its largest class) to the smallest."""
    counts = counts.copy()
    totals = counts.sum(axis=0)
    while totals.min() < min_size:  # at most num_silos · min_size moves
        small, large = int(np.argmin(totals)), int(np.argmax(totals))
        donor_class = int(np.argmax(counts[:, large]))
        counts[donor_class, large] -= 1
        counts[donor_class, small] += 1
        totals[large] -= 1
        totals[small] += 1
    return counts

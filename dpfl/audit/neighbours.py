"""Adversarial neighbouring datasets, one builder per privacy notion.

Each builder returns pairs (D, D′) that differ in one protected unit under the notion's
relation, chosen to move a release as far as a sound bound allows, or further where the bound
is wrong:

- `record` and `instance` (add/remove one record of one silo): the silo's last record removed;
  a canary of huge norm with a wrong label added; a copy of a record with its label flipped
  added. Records are added and removed at the end of a silo, so every other record keeps its
  position and hence its random draws (a fixed sample: the only difference between the two
  runs is whether the unit takes part).
- `gdp` (replace one record; reference/001 §1.5): the silo's last record replaced by the huge
  canary, or by itself with its label flipped; the silo size, which sets the noise, is kept.
  At w = 0 a logistic gradient is at most R/2, half its bound, so the worst pair replaces the
  record by one of two records with opposite gradients of norm R, from a model where both
  margins are very negative (`Neighbours.start`): 2Γ/s up to cos 0.02.
- `user` (add/remove one user across silos): every record of the user holding the most records
  removed from every silo; and a planted heavy user: a federation where one user holds many
  records of one class in every silo and the other users a few records of another class, with
  and without that user (the case where a silo that keeps training on its other records moves
  its clipped delta by up to 2C, reference/004 §2.2); and a canary user whose huge records,
  along a direction the initial model cannot tell from 0, pull every silo's delta against the
  other users' (per-user clipping: C at total weight 1; a silo's clipped delta: nearly 2C).
- `agent` (add/remove one agent): the last agent removed with all its data, with its full data,
  with a single record left, or with its records turned into huge-norm canaries (its update is
  clipped to exactly the clip norm). Only the last agent, so the other agents keep their ids, their
  sampling draws and their generators.

Datasets are `FederatedData` values: training tensors with each silo's record indices (and,
for user-level runs, each record's user). Test data is never touched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from dpfl.data import UserAllocation
from dpfl.federation import FederatedData

__all__ = [
    "CANARY_SCALE",
    "Neighbours",
    "agent_neighbours",
    "append_record",
    "canary_agent_neighbours",
    "canary_user_neighbours",
    "dirac_neighbours",
    "heavy_user_neighbours",
    "opposed_replacement_neighbours",
    "record_neighbours",
    "replacement_neighbours",
    "user_neighbours",
]

CANARY_SCALE = 1_000.0
"""The canary record is a real record scaled by this factor: its gradient is clipped for sure."""


@dataclass(frozen=True)
class Neighbours:
    """Two datasets that differ in one protected unit, and what the difference is."""

    name: str
    d: FederatedData
    d_prime: FederatedData
    start: torch.Tensor | None = field(default=None, repr=False)
    """The model round 1 starts from on both sides (None: the algorithm's own initial model).

    A release's sensitivity bound must hold at every model a round can start from (later
    rounds start wherever the noisy releases led), so the adversary may choose it."""


def record_neighbours(data: FederatedData, *, silos: Sequence[int] | None = None) -> Iterator[Neighbours]:
    """Yields add/remove-one-record neighbours in each listed silo (default: all non-empty).

    One pair at a time: each added record is a copy of the training set, so a list of them all
    held silos × 2 copies at once (a 500-silo MNIST audit: 19 GB)."""
    for s in _silos(data, silos):
        last = int(data.silos[s][-1])
        yield Neighbours(f"silo {s}: its last record removed", data, _without_last(data, s))
        x, y = data.x_train[last], int(data.y_train[last])
        canary = append_record(data, s, x * CANARY_SCALE, _other_label(y, data.num_classes))
        yield Neighbours(f"silo {s}: a record of norm ×{CANARY_SCALE:g}, wrong label, added", canary, data)
        flipped = append_record(data, s, x, _other_label(y, data.num_classes))
        yield Neighbours(f"silo {s}: a copy of a record with its label flipped added", flipped, data)


def dirac_neighbours(data: FederatedData) -> Neighbours:
    """Returns the last silo with a Dirac canary added (D) and without it (D′).

    The canary's features are zero but for the one the silo's records use least (a pixel that is
    blank in every image), there at `CANARY_SCALE` × the records' largest norm. A linear model's
    weights on that feature then move by the canary alone: neither the other records' gradients
    nor which of them a round samples reach them, so a black-box test along them sees the
    release's noise and the canary's sampling only (Nasr et al. 2023, §5: Dirac canaries).
    """
    s = len(data.silos) - 1
    x = data.x_train[data.silos[s]].reshape(len(data.silos[s]), -1)
    j = int(torch.argmin(x.abs().sum(0)))
    canary = torch.zeros(x.shape[1], dtype=data.x_train.dtype)
    canary[j] = CANARY_SCALE * max(float(x.norm(dim=1).max()), 1.0)
    d = append_record(data, s, canary.reshape(data.x_train.shape[1:]), 0)
    return Neighbours(f"silo {s}: a Dirac canary on feature {j} (the silo's least used) added", d, data)


def replacement_neighbours(
    data: FederatedData, *, silos: Sequence[int] | None = None
) -> Iterator[Neighbours]:
    """Yields replace-one-record neighbours in each listed silo (default: all non-empty), one pair
    at a time (`record_neighbours`)."""
    for s in _silos(data, silos):
        last = int(data.silos[s][-1])
        x, y = data.x_train[last], int(data.y_train[last])
        wrong = _other_label(y, data.num_classes)
        yield Neighbours(
            f"silo {s}: its last record replaced by one of norm ×{CANARY_SCALE:g}, wrong label",
            _replaced(data, s, x * CANARY_SCALE, wrong),
            data,
        )
        yield Neighbours(f"silo {s}: its last record's label flipped", _replaced(data, s, x, wrong), data)


def user_neighbours(data: FederatedData, *, user: int | None = None) -> list[Neighbours]:
    """Returns D and D′ without every record of `user` (default: the user with most records)."""
    if data.users is None:
        raise ValueError("user neighbours need a user allocation (`dataset.users`)")
    counts = data.users.records_per_user()
    u = int(np.argmax(counts)) if user is None else int(user)
    keep = [ids != u for ids in data.users.user_ids]
    silos = tuple(idx[torch.as_tensor(k)] for idx, k in zip(data.silos, keep, strict=True))
    users = UserAllocation(
        [ids[k] for ids, k in zip(data.users.user_ids, keep, strict=True)],
        data.users.num_users,
        data.users.kind,
    )
    present = int((data.users.counts()[:, u] > 0).sum())
    name = f"user {u} ({int(counts[u])} records in {present} silos) removed"
    return [Neighbours(name, data, dataclasses.replace(data, silos=silos, users=users))]


def heavy_user_neighbours(
    data: FederatedData, *, records_per_silo: int = 70, other_users: int = 4, records_per_other: int = 5
) -> list[Neighbours]:
    """Returns a planted federation with a heavy user (D) and without it (D′), from `data`'s records.

    In each silo, user 0 holds `records_per_silo` records of the most common class and each of
    `other_users` users holds `records_per_other` records of the second most common class
    (distinct records in every silo; fewer where the data has too few). The silos' own data are
    replaced: the relation allows any D.
    """
    num_silos = len(data.silos)
    labels = data.y_train.numpy()
    counts = np.bincount(labels, minlength=data.num_classes)
    heavy_class, other_class = (int(c) for c in np.argsort(-counts, kind="stable")[:2])
    heavy = np.flatnonzero(labels == heavy_class)
    others = np.flatnonzero(labels == other_class)
    # Fewer records when the data is short of them (digits has ~146 of a class for training).
    records_per_silo = min(records_per_silo, len(heavy) // num_silos)
    records_per_other = min(records_per_other, len(others) // (num_silos * other_users))
    if min(records_per_silo, records_per_other) < 1:
        raise ValueError(
            f"a planted user needs records of two classes in each of {num_silos} silos; "
            f"the data has {len(heavy)} of class {heavy_class} and {len(others)} of class {other_class}"
        )
    per_other_silo = other_users * records_per_other
    silos, users, light, light_users = [], [], [], []
    for s in range(num_silos):
        mine = heavy[s * records_per_silo : (s + 1) * records_per_silo]
        theirs = others[s * per_other_silo : (s + 1) * per_other_silo]
        owners = 1 + np.repeat(np.arange(other_users), records_per_other)
        silos.append(torch.as_tensor(np.concatenate([theirs, mine])))
        users.append(np.concatenate([owners, np.zeros(len(mine), dtype=np.int64)]).astype(np.int64))
        light.append(torch.as_tensor(theirs))
        light_users.append(owners.astype(np.int64))
    histogram = np.stack([np.bincount(labels[i.numpy()], minlength=data.num_classes) for i in silos])
    with_user = dataclasses.replace(
        data,
        silos=tuple(silos),
        users=UserAllocation(users, other_users + 1, "planted"),
        label_histogram=histogram,
    )
    without = dataclasses.replace(
        with_user, silos=tuple(light), users=UserAllocation(light_users, other_users + 1, "planted")
    )
    name = (
        f"planted user 0 ({records_per_silo} records of class {heavy_class} in each of {num_silos} silos; "
        f"{other_users} others with {records_per_other} of class {other_class}) removed"
    )
    return [Neighbours(name, with_user, without)]


def agent_neighbours(data: FederatedData) -> list[Neighbours]:
    """Returns D with the last agent (full, or reduced to one record) and D′ without it."""
    s = len(data.silos) - 1
    without = dataclasses.replace(data, silos=data.silos[:-1], label_histogram=data.label_histogram[:-1])
    one = dataclasses.replace(data, silos=(*data.silos[:-1], data.silos[-1][:1]))
    return [
        Neighbours(f"agent {s} removed with its {len(data.silos[-1])} records", data, without),
        Neighbours(f"agent {s} removed with its one record", one, without),
    ]


def _silos(data: FederatedData, silos: Sequence[int] | None) -> list[int]:
    listed = range(len(data.silos)) if silos is None else silos
    return [int(s) for s in listed if len(data.silos[int(s)])]


def _other_label(y: int, num_classes: int) -> int:
    return (y + 1) % num_classes


def _without_last(data: FederatedData, s: int) -> FederatedData:
    silos = tuple(idx[:-1] if i == s else idx for i, idx in enumerate(data.silos))
    users = data.users
    if users is not None:
        ids = [u[:-1] if i == s else u for i, u in enumerate(users.user_ids)]
        users = UserAllocation(ids, users.num_users, users.kind)
    return dataclasses.replace(data, silos=silos, users=users)


def append_record(data: FederatedData, s: int, x: torch.Tensor, y: int) -> FederatedData:
    """Returns `data` with one training record (x, y) added at the end of silo s (x in `x_train`'s shape)."""
    row = len(data.x_train)
    silos = tuple(
        torch.cat([idx, torch.tensor([row])]) if i == s else idx for i, idx in enumerate(data.silos)
    )
    users = data.users
    if users is not None:  # the new record joins the user of the silo's last record
        ids = [np.append(u, u[-1]) if i == s else u for i, u in enumerate(users.user_ids)]
        users = UserAllocation(ids, users.num_users, users.kind)
    return dataclasses.replace(
        data,
        x_train=torch.cat([data.x_train, x[None].to(data.x_train.dtype)]),
        y_train=torch.cat([data.y_train, torch.tensor([y], dtype=data.y_train.dtype)]),
        silos=silos,
        users=users,
    )


def _replaced(data: FederatedData, s: int, x: torch.Tensor, y: int) -> FederatedData:
    """Returns `data` with silo s's last record replaced by a new record (x, y) at the same position."""
    row = len(data.x_train)
    silos = tuple(
        torch.cat([idx[:-1], torch.tensor([row])]) if i == s else idx for i, idx in enumerate(data.silos)
    )
    return dataclasses.replace(
        data,
        x_train=torch.cat([data.x_train, x[None].to(data.x_train.dtype)]),
        y_train=torch.cat([data.y_train, torch.tensor([y], dtype=data.y_train.dtype)]),
        silos=silos,
    )


def canary_agent_neighbours(data: FederatedData) -> list[Neighbours]:
    """Returns D with the last agent's records turned into huge-norm canaries and D′ without it.

    Each of the agent's records is scaled by CANARY_SCALE with its label changed, so its local
    update has a norm far above any clip: clipped, it moves the sum by exactly the clip norm.
    """
    s = len(data.silos) - 1
    rows = data.silos[s]
    x = data.x_train[rows] * CANARY_SCALE
    y = (data.y_train[rows] + 1) % data.num_classes
    start = len(data.x_train)
    with_canary = dataclasses.replace(
        data,
        x_train=torch.cat([data.x_train, x.to(data.x_train.dtype)]),
        y_train=torch.cat([data.y_train, y.to(data.y_train.dtype)]),
        silos=(*data.silos[:-1], torch.arange(start, start + len(rows))),
    )
    without = dataclasses.replace(data, silos=data.silos[:-1], label_histogram=data.label_histogram[:-1])
    name = f"agent {s} ({len(rows)} records of norm ×{CANARY_SCALE:g}, wrong labels) removed"
    return [Neighbours(name, with_canary, without)]


def canary_user_neighbours(
    data: FederatedData,
    model: torch.nn.Module,
    *,
    other_users: int = 4,
    records_per_other: int = 5,
    canary_records: int = 20,
    norm: float = 50.0,
) -> list[Neighbours]:
    """Returns a planted federation with a canary user (D) and without it (D′).

    One direction x₀ (a record projected onto the null space of the model's first weight
    matrix, scaled to `norm`): at the initial model every multiple of x₀ has the same logits,
    so a linear model's gradient on (t·x₀, y) is t·(p − e_y)x₀ᵀ, linear in t. In every silo
    each of `other_users` users holds `records_per_other` copies of (x₀, y) and the canary user
    `canary_records` copies of (−CANARY_SCALE·x₀, y): the canary's gradient is the others'
    reversed and CANARY_SCALE times larger.

    - Per-user clipping (ULDP-SGD/AVG/AVG-w): the canary's contribution in every silo is the
      same and clipped to C; with uniform or records-proportional weights its total weight is
      1 (the same count in every silo), so the sum over silos moves by C.
    - A silo's clipped delta (ULDP-NAIVE): without the canary the others pull it to C·u, with
      it the canary pulls it to about −C·u, so each silo moves by nearly 2C and the sum by
      nearly 2|S|C, the sensitivity the noise must cover.

    The silos' own data are replaced: the relation allows any D.
    """
    num_silos = len(data.silos)
    flat = data.x_train.reshape(len(data.x_train), -1).double()
    norms = torch.linalg.vector_norm(flat, dim=1)
    record = int(torch.argmax(norms))
    x0 = flat[record]
    weight = next((p for p in model.parameters() if p.dim() == 2 and p.shape[1] == flat.shape[1]), None)
    if weight is not None:  # project out the initial weights' row space
        q, _ = torch.linalg.qr(weight.detach().double().T)
        x0 = x0 - q @ (q.T @ x0)
    x0 = (x0 * (norm / torch.linalg.vector_norm(x0))).reshape(data.x_train.shape[1:])
    y = int(data.y_train[record])
    per_silo = other_users * records_per_other
    others = x0.expand(per_silo, *x0.shape)
    canary = (-CANARY_SCALE * x0).expand(canary_records, *x0.shape)
    block = torch.cat([others, canary]).to(data.x_train.dtype)
    start = len(data.x_train)
    x_train = torch.cat([data.x_train, block.repeat(num_silos, *([1] * x0.dim()))])
    y_train = torch.cat([data.y_train, torch.full((num_silos * len(block),), y, dtype=data.y_train.dtype)])
    owners = np.concatenate(
        [1 + np.repeat(np.arange(other_users), records_per_other), np.zeros(canary_records)]
    ).astype(np.int64)
    silos, light = [], []
    for s in range(num_silos):
        first = start + s * len(block)
        silos.append(torch.arange(first, first + len(block)))
        light.append(torch.arange(first, first + per_silo))
    histogram = np.zeros((num_silos, data.num_classes), dtype=np.int64)
    histogram[:, y] = len(block)
    with_user = dataclasses.replace(
        data,
        x_train=x_train,
        y_train=y_train,
        silos=tuple(silos),
        users=UserAllocation([owners] * num_silos, other_users + 1, "planted"),
        label_histogram=histogram,
    )
    without = dataclasses.replace(
        with_user,
        silos=tuple(light),
        users=UserAllocation([owners[:per_silo]] * num_silos, other_users + 1, "planted"),
        label_histogram=histogram * per_silo // len(block),
    )
    name = (
        f"canary user 0 ({canary_records} records −{CANARY_SCALE:g}·x₀ in each of {num_silos} silos; "
        f"{other_users} others with {records_per_other} of x₀, all of class {y}) removed"
    )
    return [Neighbours(name, with_user, without)]


def opposed_replacement_neighbours(
    data: FederatedData,
    *,
    radius: float,
    silos: Sequence[int] | None = None,
    angle: float = 0.02,
    margin: float = 40.0,
) -> list[Neighbours]:
    """Returns replace-one neighbours whose two records have opposite gradients of full norm.

    For a linear model with the logistic loss (no intercept) a record's gradient is
    −σ(−y wᵀx)·y·x: of norm ‖x‖ only where the margin y wᵀx is very negative. The records are
    x_± = R(±cos φ·u + sin φ·v), both of label 1, with u, v orthonormal, and the round starts
    from w = −(margin / (R sin φ))·v: both margins are −margin, so the two gradients are −x_+
    and −x_−, which differ by 2R cos φ: the 2Γ bound with Γ = R (the default) up to cos φ. At
    the initial model w = 0 no record's gradient exceeds R/2, half of it.
    """
    out = []
    d = data.x_train[0].numel()
    for s in _silos(data, silos):
        last = int(data.silos[s][-1])
        u = data.x_train[last].reshape(-1).double()
        u = u / torch.linalg.vector_norm(u)
        v = torch.zeros(d, dtype=torch.float64)
        v[int(torch.argmin(u.abs()))] = 1.0
        v = v - (v @ u) * u
        v = v / torch.linalg.vector_norm(v)
        plus = radius * (math.cos(angle) * u + math.sin(angle) * v)
        minus = radius * (-math.cos(angle) * u + math.sin(angle) * v)
        start = -(margin / (radius * math.sin(angle))) * v
        shape = data.x_train.shape[1:]
        out.append(
            Neighbours(
                f"silo {s}: its last record replaced by one of two records with opposite gradients "
                f"(norm R, angle π − {2 * angle:g}) at a model that puts both at margin −{margin:g}",
                _replaced(data, s, plus.reshape(shape), 1),
                _replaced(data, s, minus.reshape(shape), 1),
                start=start,
            )
        )
    return out

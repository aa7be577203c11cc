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
- `user` (add/remove one user across silos): every record of the user holding the most records
  removed from every silo; and a planted heavy user: a federation where one user holds many
  records of one class in every silo and the other users a few records of another class, with
  and without that user (the case where a silo that keeps training on its other records moves
  its clipped delta by up to 2C, reference/004 §2.2).
- `agent` (add/remove one agent): the last agent removed with all its data, with its full data
  or with a single record left. Only the last agent, so the other agents keep their ids, their
  sampling draws and their generators.

Datasets are `FederatedData` values: training tensors with each silo's record indices (and,
for user-level runs, each record's user). Test data is never touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.data import UserAllocation
from dpfl.federation import FederatedData

__all__ = [
    "CANARY_SCALE",
    "Neighbours",
    "agent_neighbours",
    "append_record",
    "heavy_user_neighbours",
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


def record_neighbours(data: FederatedData, *, silos: Sequence[int] | None = None) -> list[Neighbours]:
    """Returns add/remove-one-record neighbours in each listed silo (default: all non-empty)."""
    out = []
    for s in _silos(data, silos):
        last = int(data.silos[s][-1])
        out.append(Neighbours(f"silo {s}: its last record removed", data, _without_last(data, s)))
        x, y = data.x_train[last], int(data.y_train[last])
        canary = append_record(data, s, x * CANARY_SCALE, _other_label(y, data.num_classes))
        out.append(
            Neighbours(f"silo {s}: a record of norm ×{CANARY_SCALE:g}, wrong label, added", canary, data)
        )
        flipped = append_record(data, s, x, _other_label(y, data.num_classes))
        out.append(Neighbours(f"silo {s}: a copy of a record with its label flipped added", flipped, data))
    return out


def replacement_neighbours(data: FederatedData, *, silos: Sequence[int] | None = None) -> list[Neighbours]:
    """Returns replace-one-record neighbours in each listed silo (default: all non-empty)."""
    out = []
    for s in _silos(data, silos):
        last = int(data.silos[s][-1])
        x, y = data.x_train[last], int(data.y_train[last])
        wrong = _other_label(y, data.num_classes)
        out.append(
            Neighbours(
                f"silo {s}: its last record replaced by one of norm ×{CANARY_SCALE:g}, wrong label",
                _replaced(data, s, x * CANARY_SCALE, wrong),
                data,
            )
        )
        out.append(
            Neighbours(f"silo {s}: its last record's label flipped", _replaced(data, s, x, wrong), data)
        )
    return out


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

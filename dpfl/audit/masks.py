"""Dropout masks keyed by record, for the fuzzer: the coupling a dropout model's guarantee is about.

A model with dropout (``fraudnet``) draws its masks by slot of the batch, from the round's keyed
generator (`dpfl.engine.noise.model_draws`): i.i.d. Bernoulli(1 − p), independent of the data.
That is why its release is private: under the coupling that gives each record common to D and D′
the same masks in both worlds, the two releases differ by the unit's clipped terms alone (≤ C),
and a mixture over the masks of Gaussians that close is as private (joint convexity). At one
fixed key, slot masks are not that coupling: a neighbour that changes the batch's layout (a
record added to or removed from the largest silo changes every silo's padded width; the slots
after it shift) gives every other record other masks, and the release moves by several C
(measured on fraudnet at the run's key: 6.98 C for ISRL-DP MB-SGD, 11.5 C for DP-FedSGD), a false
"violation" of a sound mechanism.

So the fuzzer (`dpfl.audit.fuzz`) evaluates its fixed-key releases with each dropout layer's mask
a function of the record it falls on, not of the slot (`key_masks_by_record`): each
`nn.Dropout`/`Dropout1d/2d/3d` becomes a `RecordKeyedDropout` with the same p and the same
inverted scaling 1/(1 − p), whose mask of unit j is kept where a 32-bit hash of (the run's key,
the round, the layer, j, the bits of the record's input) is ≥ p·2³². A record keeps its masks
wherever a batch puts it, in D and in D′; across records and units the masks are Bernoulli(1 − p)
as the run's are. The clip bound holds for any per-sample function, so a fixed mask per record is
a valid coupling: a correct release moves by the unit's own clipped terms and no more, whatever
the layout. This was chosen over evaluating with dropout off (eval mode), also sound, because the
masks stay in the forward pass the engine clips: the audit still takes the run's path (the same
`vmap` with per-sample randomness, the same generic per-sample gradients; the layer is an
`nn.Dropout`, so every `isinstance` branch dropout takes is taken), and a mutation that clips
what the masks do not produce (a clip factor from a pass without them, or dropout applied after
the clip, its 1/(1 − p) inflating the norm past C) still moves a release past C.

What this does not test: where the run's own masks come from (slot draws of the keyed generator,
never the records). The audited masks replace them; tests/dpfl/engine/test_fraudnet_dropout_audit.py
checks that directly (in-place neighbours leave every other record's masks bit for bit).

The record's identity is its input's bits: the only thing that travels with a record through
every algorithm's batching, padding and shuffling. The hash is taken where the raw input enters
the model (its first leaf for an `nn.Sequential`, so a voting agent's feature extractor, the
same modules, takes it too), once per forward call, and read by the model's dropout layers.
Records with the same input share masks (a copy with its label flipped has its original's),
which is still a per-record function.
"""

from __future__ import annotations

import hashlib

import torch
from torch import nn

__all__ = ["RecordKeyedDropout", "key_masks_by_record", "record_fingerprints"]

_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """Returns x·c mod 2³² for int64 x in [0, 2³²) and c < 2³², without leaving int64's range."""
    return ((x & 0xFFFF) * c + (((x >> 16) * c) & 0xFFFF) * 0x10000) & _M32


def _mix(x: torch.Tensor) -> torch.Tensor:
    """Returns the `lowbias32` integer hash (C. Wellons) of int64 x in [0, 2³²), elementwise."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def record_fingerprints(x: torch.Tensor) -> torch.Tensor:
    """Returns a 32-bit hash of each row's bits, int64 [B], for records x [B, ...].

    The values are widened to float64 (exactly) and read as two 32-bit words each; word k is mixed
    with its position before the sum, so the hash depends on every bit and where it lies."""
    words = x.detach().to(torch.float64).flatten(1).view(torch.int64)
    words = torch.stack([words & _M32, (words >> 32) & _M32], dim=-1).flatten(1)
    position = _mix((torch.arange(words.shape[1], device=words.device) + 0x9E3779B9) & _M32)
    return _mix(_mix(words ^ position).sum(1) & _M32)


class _Records:
    """The fingerprints of the records of the forward call under way, shared by the layers."""

    seeds: torch.Tensor | None = None


def _capture(module: nn.Module, args: tuple) -> None:
    module._dpfl_records.seeds = record_fingerprints(args[0])


class RecordKeyedDropout(nn.Dropout):
    """Inverted dropout whose mask is a function of the record and the unit, not of the slot
    (see the module docstring): in training mode h·m/(1 − p) with m of unit j of record i kept
    where mix(mix(salt + j) ⊕ fingerprint(record i)) ≥ p·2³²; in eval mode h itself.

    `channels`: one mask per channel (Dropout1d/2d/3d), else one per element (Dropout)."""

    def __init__(self, p: float, salt: int, records: _Records, *, channels: bool = False):
        super().__init__(p)
        self.salt = int(salt) & _M32
        self.channels = channels
        self._dpfl_records = records

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return h
        seeds = self._dpfl_records.seeds
        if seeds is None or seeds.shape[0] != h.shape[0]:
            raise RuntimeError(
                "a record-keyed dropout layer ran without its records' fingerprints: the model must "
                "be called on the records themselves (its first layer takes them)"
            )
        shape = h.shape[1:2] if self.channels else h.shape[1:]
        units = torch.arange(shape.numel(), device=h.device).view(shape)
        units = _mix((units + self.salt) & _M32)
        seeds = seeds.view(-1, *([1] * len(shape)))
        kept = _mix(units ^ seeds) >= round(self.p * 2**32)
        if self.channels:
            kept = kept.view(*kept.shape, *([1] * (h.dim() - 2)))
        return h * kept.to(h.dtype) / (1 - self.p)


def key_masks_by_record(model: nn.Module, *, key: int, round: int) -> nn.Module:
    """Replaces, in place, each dropout layer of `model` by a `RecordKeyedDropout` of the same p,
    salted by (key, round, the layer's name), and hooks the model's entry to fingerprint the
    records; returns `model`. Its parameters (and their names) are untouched.

    Raises:
        ValueError: a random layer whose masks this cannot key (alpha dropout).
    """
    records = _Records()
    found = False
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if not isinstance(child, nn.modules.dropout._DropoutNd):
                continue
            if type(child) not in (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d):
                raise ValueError(
                    f"the auditor keys the masks of nn.Dropout and Dropout1d/2d/3d by record; "
                    f"{type(child).__name__} ({name + '.' if name else ''}{child_name}) is not one"
                )
            text = f"dpfl-audit-mask:{int(key)}:{int(round)}:{name}.{child_name}".encode()
            salt = int.from_bytes(hashlib.blake2b(text, digest_size=4).digest(), "little")
            keyed = RecordKeyedDropout(child.p, salt, records, channels=type(child) is not nn.Dropout)
            keyed.train(child.training)
            setattr(parent, child_name, keyed)
            found = True
    if found:
        entry = model
        while isinstance(entry, nn.Sequential) and len(entry):
            entry = entry[0]
        entry._dpfl_records = records
        entry.register_forward_pre_hook(_capture)
    return model

"""One round's data for all silos at once: padded to a common batch size and masked.

Silos rarely hold the same number of records, but a batched computation needs rectangular
tensors. `SiloBatch` pads every silo's batch to the largest one and carries a boolean mask;
the engine guarantees a masked (padded) sample contributes exactly zero: no gradient, no
count, no loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SiloBatch"]

IndexArray = np.ndarray | torch.Tensor | Sequence[int]


@dataclass(frozen=True)
class SiloBatch:
    """Features, labels and a validity mask for S silos' batches of (padded) size B.

    Attributes:
        x: features [S, B, *feature_shape]; padded entries are zeros (finite, so that
            0 · gradient stays 0).
        y: integer class labels [S, B] (int64); padded entries are 0.
        mask: [S, B] bool; True where the sample is real.
    """

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor

    def __post_init__(self) -> None:
        if self.x.dim() < 2 or self.y.shape != self.x.shape[:2] or self.mask.shape != self.y.shape:
            raise ValueError(
                "SiloBatch needs x [S, B, *features], y [S, B] and mask [S, B]; got shapes "
                f"{tuple(self.x.shape)}, {tuple(self.y.shape)}, {tuple(self.mask.shape)}"
            )
        if self.mask.dtype != torch.bool:
            raise ValueError(f"SiloBatch.mask must be torch.bool; got {self.mask.dtype}")

    @property
    def num_silos(self) -> int:
        """Returns S."""
        return self.x.shape[0]

    @property
    def batch_size(self) -> int:
        """Returns the padded batch size B."""
        return self.x.shape[1]

    def counts(self) -> torch.Tensor:
        """Returns the number of real samples of each silo, [S] int64."""
        return self.mask.sum(dim=1)

    def silo(self, index: int) -> SiloBatch:
        """Returns silo ``index``'s batch alone, as a one-silo batch without padding."""
        keep = self.mask[index]
        return SiloBatch(self.x[index][keep][None], self.y[index][keep][None], keep[keep][None])

    @classmethod
    def concat(cls, batches: Sequence[SiloBatch]) -> SiloBatch:
        """Returns the batches' silos stacked in order, padded (and masked) to the widest batch."""
        if not batches:
            raise ValueError("SiloBatch.concat needs at least one batch")
        width = max(b.batch_size for b in batches)

        def padded(t: torch.Tensor, b: SiloBatch) -> torch.Tensor:
            if b.batch_size == width:
                return t
            pad = torch.zeros(t.shape[0], width - b.batch_size, *t.shape[2:], dtype=t.dtype)
            return torch.cat([t, pad], dim=1)

        return cls(
            torch.cat([padded(b.x, b) for b in batches]),
            torch.cat([padded(b.y, b) for b in batches]),
            torch.cat([padded(b.mask, b) for b in batches]),
        )

    @classmethod
    def full(cls, x: torch.Tensor, y: torch.Tensor) -> SiloBatch:
        """Returns a batch with every sample real, from x [S, B, *features] and y [S, B]."""
        return cls(x, y.long(), torch.ones(y.shape, dtype=torch.bool, device=y.device))  # where y is

    @classmethod
    def from_indices(
        cls,
        x: np.ndarray | torch.Tensor,
        y: np.ndarray | torch.Tensor,
        indices: Sequence[IndexArray],
        *,
        dtype: torch.dtype = torch.float32,
    ) -> SiloBatch:
        """Returns the batch that gathers ``x[indices[s]]`` and ``y[indices[s]]`` for each silo s.

        Args:
            x: all records' features [N, *features] (a numpy array or a tensor).
            y: all records' integer labels [N].
            indices: one integer index array per silo, into the first dimension of x and y;
                lengths may differ (shorter silos are padded and masked).
            dtype: floating dtype of the features.
        """
        xs = torch.as_tensor(x)
        ys = torch.as_tensor(y)
        if xs.dtype != dtype:
            xs = xs.to(dtype)
        rows = [
            torch.as_tensor(np.asarray(i) if not isinstance(i, torch.Tensor) else i, dtype=torch.long)
            for i in indices
        ]
        if not rows:
            raise ValueError("SiloBatch.from_indices needs at least one silo's indices")
        lengths = [len(r) for r in rows]
        width = max(lengths)
        if all(n == width for n in lengths):
            # Equal batches (the common case): one gather, no padding.
            index = torch.stack(rows)
            mask = torch.ones(index.shape, dtype=torch.bool)
            return cls(_gather(xs, index), _gather(ys, index).long(), mask)
        return cls.from_concatenated(xs, ys, torch.cat(rows), torch.tensor(lengths), dtype=dtype)

    @classmethod
    def from_rows(
        cls,
        x: torch.Tensor,
        y: torch.Tensor,
        index: torch.Tensor,
        sizes: torch.Tensor,
        *,
        dtype: torch.dtype = torch.float32,
    ) -> SiloBatch:
        """Returns the batch of records `index` [S, B] whose first sizes[s] of row s are real (the
        rest padding, zeroed and masked): one gather."""
        xs = x if x.dtype == dtype else x.to(dtype)
        mask = torch.arange(index.shape[1])[None, :] < sizes[:, None]
        bx, by = _gather(xs, index), _gather(y, index).long()
        if not bool(mask.all()):
            bx[~mask] = 0
            by[~mask] = 0
        return cls(bx, by, mask)

    @classmethod
    def from_concatenated(
        cls,
        x: torch.Tensor,
        y: torch.Tensor,
        rows: torch.Tensor,
        sizes: torch.Tensor,
        *,
        dtype: torch.dtype = torch.float32,
    ) -> SiloBatch:
        """Returns the batch of silos whose record indices are `rows` split into consecutive runs
        of `sizes` [S] (silo s takes the next sizes[s] indices), padded and masked.

        One padded index (padding points at record 0) and one gather, then the padding zeroed,
        rather than a gather per silo.
        """
        width = int(sizes.max()) if len(sizes) else 0
        mask = torch.arange(width)[None, :] < sizes[:, None]
        index = torch.zeros(len(sizes), width, dtype=torch.long)
        index[mask] = rows
        return cls.from_rows(x, y, index, sizes, dtype=dtype)


def _gather(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Returns values[index] for a 2-D index into the first dimension."""
    # index_select on the flattened index: on CPU it is many times faster than values[index].
    return values.index_select(0, index.reshape(-1)).view(*index.shape, *values.shape[1:])

"""Gaussian releases, and the tap through which the auditor watches them.

Every Gaussian mechanism of the algorithms adds its noise through `release` (value + noise)
or `release_noise` (the noise alone, for a caller that combines the terms itself, e.g. a
secure sum). Outside an audit both are exactly `gaussian_noise` with the same generators, so
a run's numbers do not change.

Inside ``with tap() as releases:`` every call also appends a `Release`: the listed silos,
the round, the stream, each silo's value before noise and the noise std it actually got.
``tap(noise=False)`` makes the calls add no noise, so the auditor can run an algorithm's real
round on two neighbouring datasets and compare what each silo would release (sensitivity),
and then draw the noise itself along the direction that separates them (statistical audit).

The tap is a context variable, not an argument: the algorithms need no audit code path, and
what the auditor measures is the code that runs in production.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import torch

from dpfl.engine.noise import NOISE_STREAM, gaussian_noise

__all__ = ["Release", "release", "release_noise", "tap"]


@dataclass(frozen=True)
class Release:
    """One call of a release site: each silo's value before noise and the noise std it got.

    Attributes:
        silos: the silos' global ids, one per row of `value` (a pseudo-id such as −1 for a
            server-side aggregate).
        round: the round (or the caller's finer key, e.g. round·steps + step) of the draw.
        stream: the noise stream of the draw; with `round` and `silos` it names the generators.
        value: the pre-noise values, [S, *shape], detached copies.
        std: the noise standard deviation per row, float64 [S] (`noise_std`, not σ).
        secure_sum: True when only Σ_rows (value + noise) is revealed (secure aggregation), so
            the mechanism is one Gaussian on the sum with std √Σ std²; False when every row is
            a release of its own.
    """

    silos: tuple[int, ...]
    round: int
    stream: int
    value: torch.Tensor
    std: np.ndarray
    secure_sum: bool = False


@dataclass
class _Tap:
    releases: list[Release]
    noise: bool


_TAP: ContextVar[_Tap | None] = ContextVar("dpfl_release_tap", default=None)


@contextmanager
def tap(*, noise: bool = True) -> Iterator[list[Release]]:
    """Yields the list every release inside the block is appended to; `noise=False` adds none.

    Taps do not nest: an inner tap would hide releases from the outer one.
    """
    if _TAP.get() is not None:
        raise RuntimeError("a release tap is already open; taps do not nest")
    releases: list[Release] = []
    token = _TAP.set(_Tap(releases, noise))
    try:
        yield releases
    finally:
        _TAP.reset(token)


def release_noise(
    value: torch.Tensor,
    std: float | Sequence[float] | np.ndarray | torch.Tensor,
    *,
    seed: int,
    silos: Sequence[int],
    round: int,
    stream: int = NOISE_STREAM,
    secure_sum: bool = False,
    drawn: torch.Tensor | None = None,
) -> torch.Tensor:
    """Returns the Gaussian noise the listed silos add to `value` [S, *shape], same shape.

    The noise is `gaussian_noise(value.shape[1:], std, ...)` in `value`'s dtype, or `drawn`
    when the caller drew it earlier from the same generators (e.g. all local steps at once).
    Under `tap(noise=False)` it is zeros; under any tap the call is recorded.

    Args:
        std: noise std, one for all silos or one per silo; ≥ 0.
        silos: the silos' global ids (not their positions in the batch).
        secure_sum: only the sum over silos is revealed (see `Release.secure_sum`).
        drawn: the noise already drawn for this release, [S, *shape].
    """
    active = _TAP.get()
    if active is not None:
        stds = np.broadcast_to(
            torch.as_tensor(std, dtype=torch.float64, device="cpu").reshape(-1).numpy(), (len(value),)
        ).copy()
        ids = tuple(int(s) for s in silos)
        copy = value.detach().clone()
        active.releases.append(Release(ids, int(round), int(stream), copy, stds, secure_sum))
        if not active.noise:
            return torch.zeros_like(value)
    if drawn is not None:
        return drawn
    return gaussian_noise(
        tuple(value.shape[1:]), std, seed=seed, silos=silos, round=round, stream=stream, dtype=value.dtype
    )


def release(
    value: torch.Tensor,
    std: float | Sequence[float] | np.ndarray | torch.Tensor,
    *,
    seed: int,
    silos: Sequence[int],
    round: int,
    stream: int = NOISE_STREAM,
    secure_sum: bool = False,
) -> torch.Tensor:
    """Returns value + N(0, std²) per listed silo, [S, *shape]: `release_noise` added to `value`."""
    return value + release_noise(
        value, std, seed=seed, silos=silos, round=round, stream=stream, secure_sum=secure_sum
    )

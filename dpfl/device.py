"""Where a run computes: the CPU or a CUDA GPU, chosen once per process and never part of the spec.

The device is an execution setting, like a thread count: the ledger does not depend on it, and a
spec and seed give the same numbers on the same device. Every random draw still comes from the
CPU generators of `dpfl.engine.noise` (one per silo, round and stream), and is moved to the device
once drawn, so a run's noise, samples and participation are the same on every device; only the
floating-point arithmetic of training differs.

The runner places a run's data and model on the device once (`FederatedData.to`), then computes its
set-up, rounds and evaluation inside `placed(device)`, under which the tensors an algorithm creates
(accumulators, masks, index tensors) are born on the device rather than copied to it each round.
"""

from __future__ import annotations

import contextlib
import os
from contextlib import AbstractContextManager

import torch

from dpfl.errors import SpecError

__all__ = ["DEVICE_ENV", "add_rows_", "available_devices", "block_bytes", "cpu", "placed", "resolve_device"]

DEVICE_ENV = "DPFL_DEVICE"
"""The environment variable naming the device when no `--device` is given."""


def available_devices() -> list[str]:
    """Returns the devices this process can compute on: `cpu`, then `cuda:0`, `cuda:1`, …"""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu", *(f"cuda:{i}" for i in range(count))]


def resolve_device(name: str | None = None, *, field: str = "device") -> torch.device:
    """Returns the device named `name`, else by `DPFL_DEVICE`, else CUDA when present, else the CPU.

    `auto` means the default. Raises SpecError naming `field` for a name that is not a device of
    this machine (a typo, or `cuda` where PyTorch sees no GPU), listing the ones it has.
    """
    raw = (name if name is not None else os.environ.get(DEVICE_ENV, "")).strip().lower()
    here = available_devices()
    if raw in ("", "auto"):
        return torch.device("cuda" if len(here) > 1 else "cpu")
    try:
        device = torch.device(raw)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise SpecError(field, f"must be auto, cpu, cuda or cuda:<index>; got {raw!r}.")
    if device.type == "cuda" and f"cuda:{device.index or 0}" not in here:
        found = "no CUDA device" if len(here) == 1 else f"the devices {', '.join(here)}"
        raise SpecError(field, f"is {raw!r}, but PyTorch here sees {found}; use one of {', '.join(here)}.")
    return device


def cpu(device: torch.device) -> bool:
    """Returns whether `device` is the CPU."""
    return torch.device(device).type == "cpu"


def placed(device: torch.device) -> AbstractContextManager:
    """Returns a context under which tensors created without a device are created on `device`.

    On the CPU it does nothing: that is already where they go, and the mode that redirects them
    costs 10–20 % of a small round (an MLP round of 3 ms).
    """
    return contextlib.nullcontext() if cpu(device) else torch.device(device)


def add_rows_(out: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Adds rows[i] to out[index[i]] for every i, in place, in the same order on every run.

    CUDA's `index_add_` adds with atomics, in an order (and so to a float sum) that changes from run
    to run; there the rows are summed by a one-hot product instead, whose order is fixed. The CPU's
    `index_add_` adds in order already.
    """
    if cpu(out.device):
        return out.index_add_(0, index, rows)
    onehot = torch.zeros(len(out), len(index), dtype=rows.dtype, device=out.device)
    onehot[index, torch.arange(len(index), device=out.device)] = 1
    return out.addmm_(onehot, rows)


def block_bytes(cpu_bytes: int, device: torch.device | None = None) -> int:
    """Returns the working memory one batched computation may take on `device` (None: where tensors
    are created now): `cpu_bytes` on the CPU, whose budgets are sized to its caches and memory;
    an eighth of a GPU's memory there, where one kernel over many models or samples beats several
    over few (a CIFAR-10 ISRL-DP round on an H100 took 83 ms in the CPU's 1 GiB blocks).
    """
    device = torch.get_default_device() if device is None else torch.device(device)
    if cpu(device):
        return cpu_bytes
    return torch.cuda.get_device_properties(device).total_memory // 8

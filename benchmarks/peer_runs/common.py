"""What every peer script shares: the exported data, the MLP, evaluation and the one JSON line.

The peer scripts run in the peers' venv (.venv-peers: opacus, flwr, pfl), which does not have
dpfl; they read the workload that `benchmarks/peers.py` exported from our loader to an .npz
(`benchmarks.peers_data.export`): the same PCA-50 features, the same silos, the same initial
weights, and the settings (rounds, batch, clip, learning rates, ε, δ).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass
class Workload:
    """The exported arrays (torch) and settings of one workload."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    silos: list[torch.Tensor]  # each silo's (or client's) training-record indices
    init: list[torch.Tensor]  # the MLP's initial weight, bias, weight, bias
    settings: dict


def load(path: str) -> Workload:
    """Returns the workload exported to `path`."""
    with np.load(path) as f:
        offsets = f["silo_offsets"]
        order = torch.as_tensor(f["silo_records"])
        return Workload(
            x_train=torch.as_tensor(f["x_train"]),
            y_train=torch.as_tensor(f["y_train"]),
            x_test=torch.as_tensor(f["x_test"]),
            y_test=torch.as_tensor(f["y_test"]),
            silos=[order[a:b] for a, b in itertools.pairwise(offsets)],
            init=[torch.as_tensor(f[f"init_{i}"]) for i in range(4)],
            settings=json.loads(str(f["settings"])),
        )


def mlp(work: Workload) -> nn.Sequential:
    """Returns the MLP features→hidden→classes with ReLU, at the exported initial weights."""
    w0, _, w1, _ = work.init
    model = nn.Sequential(nn.Linear(w0.shape[1], w0.shape[0]), nn.ReLU(), nn.Linear(w1.shape[1], w1.shape[0]))
    set_flat(model, work.init)
    return model


def set_flat(model: nn.Module, tensors) -> None:
    """Copies `tensors` (one per parameter, in order) into the model's parameters."""
    with torch.no_grad():
        for p, t in zip(model.parameters(), tensors, strict=True):
            p.copy_(torch.as_tensor(t))


def accuracy(model: nn.Module, work: Workload) -> float:
    """Returns the model's accuracy on the test split."""
    with torch.no_grad():
        return float((model(work.x_test).argmax(1) == work.y_test).float().mean())


def report(**numbers) -> None:
    """Prints the run's numbers as the one JSON line the benchmark reads (the last line)."""
    print(json.dumps(numbers), flush=True)


class Clock:
    """Sums the seconds spent inside `with clock:` blocks (the rounds alone)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> Clock:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.perf_counter() - self._start


def arg(name: str, default: str | None = None) -> str:
    """Returns the value after `--name` on the command line (a tiny parser: the scripts take few)."""
    flag = f"--{name}"
    if flag in sys.argv:
        return sys.argv[sys.argv.index(flag) + 1]
    if default is None:
        raise SystemExit(f"missing {flag}")
    return default

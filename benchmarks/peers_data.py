"""The peers benchmark's workloads: our run specs, and their data exported for the peers' scripts.

The peers read exactly what our run trains on: `export` prepares a spec with our loader
(`dpfl.runner.prepare`: MNIST, PCA-50, the silo split, the MLP's seeded initial weights) and
writes it to one .npz with the settings the peers need (rounds, batch, clip, learning rates,
ε, δ). `benchmarks/peer_runs/common.py` reads it back in the peers' venv.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DP_FEDAVG", "ISRL", "export", "settings_of"]

# Workload 1: ISRL-DP MB-SGD on MNIST PCA-50, 25 silos holding digit pairs (configs/isrl_mnist.yaml)
ISRL: dict[str, Any] = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.5, "batch_size": 128, "clip": 1.0},
    "dataset": {"name": "mnist", "silos": 25, "partition": {"kind": "pairs"}, "features": {"pca": 50}},
    "model": {"name": "mlp", "hidden": [64]},
    "rounds": 50,
    "participation": 25,
    "privacy": {"epsilon": 3.0, "delta": 1.0e-5, "accountant": "rdp"},
    "eval_every": 50,
    "seed": 0,
}
# Workload 2: DP-FedAvg (McMahan et al. 2018), client-level central DP: 100 clients (iid
# silos of 600 records), each Poisson-sampled at q = 0.2, 10 local SGD steps, updates clipped
# to S = 1, Gaussian noise on their sum.
DP_FEDAVG: dict[str, Any] = {
    "algorithm": "dp_fedavg",
    "params": {
        "lr": 0.1,
        "local_steps": 10,
        "batch_size": 32,
        "sample_rate": 0.2,
        "clip": 1.0,
        "server_lr": 1.0,
    },
    "dataset": {"name": "mnist", "silos": 100, "partition": {"kind": "iid"}, "features": {"pca": 50}},
    "model": {"name": "mlp", "hidden": [64]},
    "rounds": 50,
    "privacy": {"epsilon": 3.0, "delta": 1.0e-5, "accountant": "rdp"},
    "eval_every": 50,
    "seed": 0,
}


def settings_of(spec: dict[str, Any]) -> dict[str, Any]:
    """Returns what a peer needs besides the arrays: the spec's params, rounds, ε and δ."""
    return dict(
        spec["params"],
        algorithm=spec["algorithm"],
        rounds=spec["rounds"],
        epsilon=spec["privacy"]["epsilon"],
        delta=spec["privacy"]["delta"],
    )


def export(spec: dict[str, Any], path: Path, *, data_dirs: Sequence[Path] = ()) -> Path:
    """Writes the spec's prepared data, silo split, initial MLP weights and settings to `path`.

    Returns `path`. The silos are stored as one array of record indices with offsets (silo i
    holds silo_records[silo_offsets[i]:silo_offsets[i+1]]).
    """
    from dpfl import runner  # our venv only: the peers' scripts read the file, never this module
    from dpfl.spec import parse_spec

    algorithm = runner.prepare(parse_spec(copy.deepcopy(spec)), data_dirs=list(data_dirs))
    data = algorithm.data
    sizes = [len(s) for s in data.silos]
    weights = [p.detach().numpy() for p in algorithm.model.parameters()]
    np.savez(
        path,
        x_train=data.x_train.numpy(),
        y_train=data.y_train.numpy(),
        x_test=data.x_test.numpy(),
        y_test=data.y_test.numpy(),
        silo_records=np.concatenate([s.numpy() for s in data.silos]),
        silo_offsets=np.concatenate([[0], np.cumsum(sizes)]),
        settings=np.array(json.dumps(settings_of(spec))),
        **{f"init_{i}": w for i, w in enumerate(weights)},
    )
    return path

"""Federated algorithms, registered by name (see `registered_algorithms`)."""

from dpfl.algorithms import fedavg, isrl, newton, uldp, voting  # noqa: F401  (registers the algorithms)
from dpfl.algorithms.base import (
    ALGORITHMS,
    Algorithm,
    Params,
    RoundOutput,
    algorithm_class,
    participants,
    registered_algorithms,
)
from dpfl.plugins import load_plugins

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Params",
    "RoundOutput",
    "algorithm_class",
    "participants",
    "registered_algorithms",
]

# Last: a plugin's algorithm may build on the ones above (dpfl.plugins).
load_plugins()

"""Federated algorithms, registered by name (see `registered_algorithms`)."""

from dpfl.algorithms import fedavg, isrl, newton, uldp, voting  # noqa: F401  (registers the algorithms)
from dpfl.algorithms.base import (
    Algorithm,
    Params,
    RoundOutput,
    algorithm_class,
    participants,
    register_algorithm,
    registered_algorithms,
)

__all__ = [
    "Algorithm",
    "Params",
    "RoundOutput",
    "algorithm_class",
    "participants",
    "register_algorithm",
    "registered_algorithms",
]

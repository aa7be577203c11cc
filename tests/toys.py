"""A toy algorithm, registered by a test: proof that one registration is the only edit a new
algorithm needs (tests/test_registries.py, tests/browser/test_plugin.py)."""

from __future__ import annotations

from dpfl.algorithms import ALGORITHMS, Algorithm
from dpfl.algorithms.fedavg import FedAvg

NAME = "toy_average"


def toy_class() -> type[Algorithm]:
    """Returns a fresh class: FedAvg under another name, a non-private reference."""

    class ToyAverage(FedAvg):
        paper = "a test's toy"
        summary = "federated averaging, registered by a test"

    return ToyAverage


def register() -> None:
    """Registers the toy as `NAME` (as a plugin module would, with the same decorator)."""
    ALGORITHMS.register(NAME)(toy_class())

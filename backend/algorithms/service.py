"""The algorithm catalogue, generated from the dpfl registry (never written by hand)."""

from __future__ import annotations

from backend.algorithms.schemas import AlgorithmRead
from dpfl import runner
from dpfl.algorithms import algorithm_class, registered_algorithms

__all__ = ["catalogue"]


def catalogue() -> list[AlgorithmRead]:
    """Returns every registered algorithm with its paper, notion, params schema and defaults, and
    what a spec must give it (the requirements `dpfl.runner.check` enforces), by name."""
    out = []
    for name in sorted(registered_algorithms()):
        cls = algorithm_class(name)
        out.append(
            AlgorithmRead(
                name=name,
                paper=cls.paper,
                notion=cls.notion,
                private=cls.notion != "none",
                summary=cls.summary,
                params_schema=cls.Params.model_json_schema(),
                defaults=cls.Params().model_dump(mode="json"),
                models=runner.accepted_models(cls),
                datasets=runner.accepted_datasets(cls),
                requires_users=cls.requires_users,
                binary_labels=cls.binary_labels,
            )
        )
    return out

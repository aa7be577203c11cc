"""How the auditor covers an algorithm: its neighbours and the params that fix its sample.

A leaf module: it imports no algorithm, so a plugin module may import it (and
`dpfl.audit.neighbours`) while `dpfl.algorithms` is loading its plugins, and declare its own
algorithm's coverage as a class attribute::

    from dpfl.audit.coverage import Coverage, all_records
    from dpfl.audit.neighbours import record_neighbours

    @ALGORITHMS.register("mine")
    class Mine(Algorithm):
        audit_coverage = Coverage(record_neighbours, all_records)

`dpfl.audit.fuzz.coverage_of` reads it; the built-in algorithms' coverage is its table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpfl.algorithms import Algorithm
    from dpfl.audit.neighbours import Neighbours
    from dpfl.federation import FederatedData

__all__ = ["Coverage", "all_records"]


@dataclass(frozen=True)
class Coverage:
    """How the auditor covers one algorithm: its neighbours and the params that fix its sample.

    `neighbours` is one builder of the data, or one builder of the algorithm per notion when a
    param chooses the notion (the voting level). `fixed_sample` returns the params that make
    every sampling rate 1, so both neighbours see the same sample. `per_query`: the release's
    axis 1 are queries, each a ledger event of its own (a noisy-argmax round answers a batch,
    one `VoteEvent` each), so each query is compared with its own event: the claim is Δ per
    query, not for the whole batch. `black_box`: the pair the black-box trials run on (default:
    the fuzzer's worst), e.g. a canary whose move no other record's gradient reaches.
    """

    neighbours: (
        Callable[[FederatedData], Iterable[Neighbours]]
        | dict[str, Callable[[Algorithm], Iterable[Neighbours]]]
    )
    fixed_sample: Callable[[FederatedData], dict[str, Any]] = lambda data: {}
    per_query: bool = False
    black_box: Callable[[FederatedData], Neighbours] | None = None

    def pairs(self, algorithm: Algorithm) -> Iterable[Neighbours]:
        """Returns the neighbours of `algorithm`'s notion on its data (a list, or pairs built one
        at a time as they are asked for)."""
        if isinstance(self.neighbours, dict):
            return self.neighbours[algorithm.notion](algorithm)
        return self.neighbours(algorithm.data)


def all_records(data: FederatedData) -> dict[str, Any]:
    """Returns the params under which a record-level DP-SGD uses every record: a batch size above
    every silo's size makes each Poisson rate K/n_i = 1."""
    return {"batch_size": int(max(data.silo_sizes.max(), 1)) + 1}

"""What a sweep would be before it is submitted: its runs, the worker tasks they form, and a time
estimate from this server's own history.

The estimate is the median seconds per round of the last succeeded runs of the same algorithm on
the same dataset here (set-up included, as a worker spends it), times each task's rounds. A batch
of runs trains as one task, so a task is counted once, at its slowest run. Where an algorithm has
no past run on the dataset, there is nothing to estimate from: the estimate is None and the
preview says which.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.models import Run, RunStatus
from backend.settings import Settings
from backend.sweeps.schemas import AlgorithmPreview, SweepPreview
from backend.sweeps.service import planned
from dpfl.batching import batches
from dpfl.spec import RunSpec

__all__ = ["PACE_RUNS", "preview"]

PACE_RUNS = 20
"""How many of the latest succeeded runs of an (algorithm, dataset) pair set its pace."""


def preview(
    session: Session, *, base: Mapping[str, Any], grid: Mapping[str, Any], settings: Settings
) -> SweepPreview:
    """Returns the sweep's run count, its worker tasks per algorithm and the estimated worker time.

    Raises:
        PointError: a field of the base, the grid or one point is invalid (422), as on submit.
    """
    _, specs = planned(base, grid, settings)
    groups = batches(specs, max_runs=settings.batch_runs)
    pace = _seconds_per_round(session, {(spec.algorithm, spec.dataset.name) for spec in specs})
    by_algorithm: dict[str, dict[str, Any]] = {}
    for spec in specs:
        row = by_algorithm.setdefault(spec.algorithm, {"runs": 0, "tasks": 0, "models": set()})
        row["runs"] += 1
        row["models"].add(spec.model.name)
    task_seconds: list[float | None] = []
    for group in groups:
        by_algorithm[specs[group[0]].algorithm]["tasks"] += 1
        task_seconds.append(_task_seconds([specs[i] for i in group], pace))
    algorithms = [
        AlgorithmPreview(
            algorithm=name,
            models=sorted(row["models"]),
            runs=row["runs"],
            tasks=row["tasks"],
            seconds_per_round=_pace_of(name, specs, pace),
            past_runs=sum(len(v) for (a, _), v in pace.items() if a == name),
        )
        for name, row in by_algorithm.items()
    ]
    known = [s for s in task_seconds if s is not None]
    return SweepPreview(
        num_runs=len(specs),
        tasks=len(groups),
        estimated_seconds=sum(known) if len(known) == len(task_seconds) else None,
        algorithms=algorithms,
    )


def _seconds_per_round(
    session: Session, pairs: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], list[float]]:
    """Returns the seconds per round of the latest PACE_RUNS succeeded runs of each pair."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for algorithm, dataset in pairs:
        rows = session.execute(
            select(Run.started_at, Run.finished_at, Run.rounds)
            .where(
                Run.algorithm == algorithm,
                Run.dataset == dataset,
                Run.status == RunStatus.succeeded,
                Run.started_at.is_not(None),
                Run.finished_at.is_not(None),
                Run.rounds > 0,
            )
            .order_by(Run.finished_at.desc())
            .limit(PACE_RUNS)
        ).all()
        for started, finished, rounds in rows:
            out[(algorithm, dataset)].append(max((finished - started).total_seconds(), 0.0) / rounds)
    return out


def _task_seconds(specs: list[RunSpec], pace: Mapping[tuple[str, str], list[float]]) -> float | None:
    seconds = []
    for spec in specs:
        past = pace.get((spec.algorithm, spec.dataset.name))
        if not past:
            return None
        seconds.append(statistics.median(past) * spec.rounds)
    return max(seconds)


def _pace_of(
    algorithm: str, specs: list[RunSpec], pace: Mapping[tuple[str, str], list[float]]
) -> float | None:
    past = [
        s
        for spec in specs
        if spec.algorithm == algorithm
        for s in pace.get((algorithm, spec.dataset.name), [])
    ]
    return statistics.median(past) if past else None

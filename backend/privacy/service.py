"""Projecting a spec's privacy without running it: σ, ε per round, and the budget left.

`backend.runs.service.project` is the one projection admission and the worker compute too
(`dpfl.runner.projected`), so what the preview refuses a submission refuses, and the reverse.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from sqlalchemy.orm import Session

from backend.budgets.service import covering, get_budget
from backend.errors import NotFound
from backend.privacy.schemas import ProjectionRead
from backend.runs import service as runs
from backend.settings import Settings
from dpfl import plots, runner
from dpfl.data import load_dataset
from dpfl.spec import DatasetSpec, RunSpec

__all__ = ["SLOW_PROJECTION_S", "project"]

SLOW_PROJECTION_S = 5.0  # a projection this slow is worth a word before the run is started


def project(session: Session, *, spec: RunSpec, settings: Settings) -> ProjectionRead:
    """Returns the spec's notion, σ, δ, accountant, ε per round and at the end, and the budget left.

    Raises:
        SpecError: the spec is invalid or beyond this server's limits (422 naming the field).
        DatasetUnavailable: the dataset's files are missing (σ needs the partition).
    """
    runs.check_limits(spec, settings)
    budget = _remaining(session, covering(session, spec, settings))
    began = time.monotonic()
    projection = runs.project(spec, settings, protected=budget is not None)
    took = time.monotonic() - began
    cls = runner.check(spec)
    warnings = [w for w in [cls.cost_warning(spec, cls.parse_params(spec.params))] if w is not None]
    if took > SLOW_PROJECTION_S:
        warnings.append(
            f"projecting this spec took {took:.0f} s"
            + ("; its worker calibrates σ again on the run's secret draws" if budget is not None else "")
        )
    target_epsilon = None if spec.privacy is None else spec.privacy.epsilon
    if budget is not None:  # protected: the partition's label counts are a diagnostic, withheld
        histogram, figure = None, None
    else:
        key = json.dumps(spec.dataset.model_dump(mode="json"), sort_keys=True)  # a DatasetSpec holds dicts
        histogram, class_names = _label_histogram(
            key, spec.seed, tuple(settings.data_dirs), settings.cache_dir
        )
        figure = plots.to_json(plots.label_histogram(histogram, class_names=class_names))
    return ProjectionRead(
        notion=projection.notion,
        epsilon=projection.epsilon,
        target_epsilon=target_epsilon,
        noise_multiplier=projection.noise_multiplier,
        delta=projection.delta,
        accountant=projection.accountant,
        planned_epsilon=projection.planned_epsilon,
        budget=budget,
        label_histogram=histogram,
        partition_figure=figure,
        not_guaranteed=projection.uncovered,
        implausible=projection.implausible,
        warnings=warnings,
    )


@functools.lru_cache(maxsize=32)
def _label_histogram(
    dataset_json: str, seed: int, data_dirs: tuple[Path, ...], cache_dir: Path
) -> tuple[list, tuple[str, ...] | None]:
    # Labels only: feature transforms (PCA) do not change them, so they are skipped. Returns the
    # histogram and the classes' names.
    dataset = DatasetSpec.model_validate_json(dataset_json)
    data = load_dataset(dataset.name, search_dirs=data_dirs, cache_dir=cache_dir, **dataset.options)
    _, split, _ = runner.federate(data, dataset, seed=seed)  # the run's own silos
    return split.label_histogram().tolist(), data.class_names


def _remaining(session: Session, budget: str | None) -> float | None:
    try:
        return None if budget is None else get_budget(session, budget).remaining
    except NotFound:  # deleted meanwhile
        return None

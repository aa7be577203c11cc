"""Rules and queries for sweeps. Services flush; the request that called them commits.

A sweep is created whole or not at all: every point is validated and projected before anything
is written (`runs.admit`), then the sweep row and one run per point are added (`runs.add_run`),
each reserved against its dataset's budget. Any refusal raises, and the request rolls everything back.
"""

from __future__ import annotations

import json
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, undefer

from backend.budgets.service import covering, usage
from backend.errors import BudgetExceeded, NotFound
from backend.models import Budget, Run, RunStatus, Sweep
from backend.runs import service as runs
from backend.runs.listing import Archived, archived_filter, text_clause
from backend.settings import Settings
from backend.sweeps.schemas import SweepBatch, SweepCreated, SweepDetail, SweepRead, SweepSummary
from backend.sweeps.summary import Outcome, pareto_front, reference, summary_rows
from dpfl import runner
from dpfl.batching import batches
from dpfl.configuration import configurations
from dpfl.data import headline_metric
from dpfl.errors import SpecError, UnknownNameError
from dpfl.metrics import in_metric
from dpfl.spec import RunSpec, parse_spec
from dpfl.sweep import Point, PointError, expand, locate

__all__ = ["create_sweep", "created", "describe", "detail", "get_sweep", "list_sweeps", "planned", "summary"]

# where a registry lookup's name sits in a spec (as backend.errors reports it for single runs)
_UNKNOWN_FIELDS = {
    "algorithm": "algorithm",
    "model": "model.name",
    "accountant": "privacy.accountant",
    "partition kind": "dataset.partition.kind",
    "dataset": "dataset.name",
}


def create_sweep(
    session: Session, *, name: str, base: Mapping[str, Any], grid: Mapping[str, Any], settings: Settings
) -> tuple[Sweep, list[Run]]:
    """Expands the grid, validates every point, and adds the sweep and its queued runs, those that
    can train together in batches (`dpfl.batching`, at most `settings.batch_runs` a batch).

    Raises:
        PointError: a field of the base, the grid or one point is invalid (422).
        BudgetExceeded: the sweep's runs would overspend a dataset's budget (409).
    """
    points, specs = planned(base, grid, settings)
    _check_budgets(session, specs, settings)
    # Every point is projected before the first write: on SQLite the first write takes the one
    # write lock until the commit, and a 300-point sweep projecting under it held it for a
    # minute while the workers' rounds waited for it.
    admissions = []
    for i, spec in enumerate(specs):
        try:
            admissions.append(runs.admit(session, spec=spec, settings=settings))
        except (SpecError, UnknownNameError) as exc:
            raise _point_error(exc, i, points, base) from None
    sweep = Sweep(name=name, base=dict(base), grid=dict(grid), num_runs=len(specs))
    session.add(sweep)
    session.flush()
    batch_of: dict[int, str] = {}
    for group in batches(specs, max_runs=settings.batch_runs):
        if len(group) > 1:
            batch_of |= dict.fromkeys(group, str(uuid.uuid4()))
    created_runs = []
    for i, admission in enumerate(admissions):
        try:
            created_runs.append(runs.add_run(session, admission, sweep_id=sweep.id, batch_id=batch_of.get(i)))
        except BudgetExceeded as exc:
            raise BudgetExceeded(
                f"{exc.message} (point {i + 1} of {len(specs)}); no run of the sweep was created"
            ) from None
    return sweep, created_runs


def planned(
    base: Mapping[str, Any], grid: Mapping[str, Any], settings: Settings
) -> tuple[list[Point], list[RunSpec]]:
    """Returns the grid's points and their specs, each checked without its data.

    Raises:
        PointError: a field of the base, the grid or one point is invalid (422).
    """
    points = expand(base, grid, max_points=settings.max_sweep_points)
    return points, [_validated(i, points, base, settings) for i in range(len(points))]


def get_sweep(session: Session, sweep_id: str) -> Sweep:
    """Returns the sweep; raises NotFound (404) naming the id."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise NotFound(f"sweep {sweep_id!r} does not exist")
    return sweep


def list_sweeps(
    session: Session,
    *,
    q: str | None = None,
    archived: Archived = Archived.false,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[SweepRead], int]:
    """Returns one page of sweeps, newest first, with their runs' status counts; and the total.

    `q` searches name and tags (as the runs list does) and the start of the id.
    """
    where = archived_filter(Sweep.archived, archived)
    if q and q.strip():
        where.append(or_(text_clause(q, Sweep.name, tags=Sweep.tags), Sweep.id.startswith(q.strip().lower())))
    total = session.scalar(select(func.count()).select_from(Sweep).where(*where)) or 0
    rows = session.scalars(
        select(Sweep)
        .where(*where)
        .order_by(Sweep.created_at.desc(), Sweep.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return describe(session, rows), total


def describe(session: Session, sweeps: Sequence[Sweep]) -> list[SweepRead]:
    """Returns each sweep as the API shows it, with its runs' status counts and mean progress."""
    found = session.execute(
        select(Run.sweep_id, Run.status, func.count(), func.coalesce(func.sum(Run.progress), 0.0))
        .where(Run.sweep_id.in_([s.id for s in sweeps]))
        .group_by(Run.sweep_id, Run.status)
    ).all()
    counts: dict[str, dict[str, int]] = defaultdict(_no_counts)
    progress: dict[str, float] = defaultdict(float)
    for sweep_id, status, count, progress_sum in found:
        counts[sweep_id][status] = count
        progress[sweep_id] += float(progress_sum)
    out = []
    for sweep in sweeps:
        num = sum(counts[sweep.id].values())
        out.append(SweepRead(**_view(sweep, counts[sweep.id], progress[sweep.id] / num if num else 0.0)))
    return out


def created(sweep: Sweep, created_runs: Sequence[Run]) -> SweepCreated:
    """Returns a just-created sweep as the API shows it, with its run ids in point order."""
    counts = _no_counts() | {RunStatus.queued.value: len(created_runs)}
    return SweepCreated(**_view(sweep, counts, 0.0), run_ids=[r.id for r in created_runs])


def detail(session: Session, sweep_id: str) -> SweepDetail:
    """Returns the sweep with its runs (oldest first), their status counts and mean progress, and
    the batches its runs train in."""
    sweep = get_sweep(session, sweep_id)
    rows = session.scalars(
        select(Run)
        .where(Run.sweep_id == sweep_id)
        .options(undefer(Run.seed), undefer(Run.params))  # in the one query, not one per run
        .order_by(Run.created_at, Run.id)
    ).all()
    counts = _no_counts()
    for run in rows:
        counts[run.status] += 1
    progress = math.fsum(r.progress for r in rows) / len(rows) if rows else 0.0
    batches: dict[str, SweepBatch] = {}
    for run in rows:
        if run.batch_id is not None:
            batch = batches.setdefault(
                run.batch_id, SweepBatch(id=run.batch_id, algorithm=run.algorithm, run_ids=[])
            )
            batch.run_ids.append(run.id)
    return SweepDetail(**_view(sweep, counts, progress), runs=rows, batches=list(batches.values()))


def summary(session: Session, sweep_id: str) -> SweepSummary:
    """Returns the sweep's succeeded runs summarised per (algorithm, ε), its Pareto front and reference,
    each run in its dataset's headline metric (`dpfl.data.headline_metric`)."""
    sweep = get_sweep(session, sweep_id)
    counts = _no_counts()
    for status, count in session.execute(
        select(Run.status, func.count()).where(Run.sweep_id == sweep.id).group_by(Run.status)
    ):
        counts[status] = count
    succeeded = session.execute(
        select(
            Run.id,
            Run.algorithm,
            Run.notion,
            Run.target_epsilon,
            Run.spec[("privacy", "noise_multiplier")].as_float(),
            Run.final_accuracy,
            Run.final_balanced_accuracy,
            Run.dataset,
            Run.epsilon,
            Run.spec,  # its configuration: runs are averaged over seeds only
        ).where(Run.sweep_id == sweep.id, Run.status == RunStatus.succeeded)
    ).all()
    configs = configurations({row[0]: row[-1] for row in succeeded})
    outcomes = []
    for run_id, algorithm, notion, target, sigma, accuracy, balanced, dataset, epsilon, _ in succeeded:
        metric = headline_metric(dataset)
        outcomes.append(
            Outcome(
                algorithm=algorithm,
                notion=notion,
                target_epsilon=target,
                noise_multiplier=sigma,
                accuracy=in_metric(metric, accuracy=accuracy, balanced_accuracy=balanced),
                epsilon=epsilon,
                config=configs[run_id].key,
                setting=configs[run_id].label,
                metric=metric,
                dataset=dataset,
            )
        )
    rows = summary_rows(outcomes)
    return SweepSummary(
        sweep_id=sweep.id,
        counts=counts,
        rows=rows,
        pareto=pareto_front(rows),
        reference=reference(rows),
    )


def _no_counts() -> dict[str, int]:
    return {status.value: 0 for status in RunStatus}


def _view(sweep: Sweep, counts: dict[str, int], progress: float) -> dict[str, Any]:
    return {
        "id": sweep.id,
        "name": sweep.name,
        "tags": sweep.tags,
        "notes": sweep.notes,
        "archived": sweep.archived,
        "created_at": sweep.created_at,
        "num_runs": sweep.num_runs,
        "base": sweep.base,
        "grid": sweep.grid,
        "counts": counts,
        "progress": progress,
    }


def _validated(index: int, points: Sequence[Point], base: Mapping[str, Any], settings: Settings) -> RunSpec:
    # The checks of runs.create_run that need no data, so a bad point is refused before any
    # point's data is loaded; `runs.admit` then checks each point on its data, as a run's setup does.
    point = points[index]
    try:
        spec = parse_spec(point.data)
        runs.check_limits(spec, settings)
        runner.check(spec)
    except (SpecError, UnknownNameError) as exc:
        raise _point_error(exc, index, points, base) from None
    return spec


def _point_error(
    exc: SpecError | UnknownNameError, index: int, points: Sequence[Point], base: Mapping[str, Any]
) -> PointError:
    if isinstance(exc, PointError):
        return exc
    if isinstance(exc, SpecError):
        field, reason = exc.field, exc.reason
    else:
        field, reason = _UNKNOWN_FIELDS.get(exc.kind, exc.kind.replace(" ", "_")), str(exc)
    point = points[index]
    where = ", ".join(f"{key}={json.dumps(value)}" for key, value in point.overrides.items())
    if where:
        reason = f"{reason} (point {index + 1} of {len(points)}: {where})"
    return PointError(locate(field, point, base), reason)


def _check_budgets(session: Session, specs: Iterable[RunSpec], settings: Settings) -> None:
    # The sum of the ε targets is known before any run is projected, so an overspending sweep is
    # refused with its total; runs.create_run still admits each run under the budget's lock.
    needs: dict[str, list[float]] = defaultdict(list)
    for spec in specs:
        privacy = spec.privacy
        if privacy is None or privacy.epsilon is None or privacy.calibration == "paper":
            continue
        if (budget := covering(session, spec, settings)) is not None:
            needs[budget].append(privacy.epsilon)
    for dataset, targets in needs.items():
        budget = session.get(Budget, dataset)
        if budget is None:
            continue
        used = usage(session, dataset)
        remaining = budget.total_epsilon - used["spent"] - used["reserved"]
        total = math.fsum(targets)
        if total > remaining + 1e-12:
            raise BudgetExceeded(
                f"dataset {dataset!r} has ε {max(remaining, 0):.4g} left of {budget.total_epsilon:.4g}; "
                f"this sweep's {len(targets)} private runs need {total:.4g} in all"
            )

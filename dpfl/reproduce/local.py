"""Running a reproduction's sweeps in this process, one point after another, through `dpfl.runner.run`.

A point that fails (an accountant that cannot answer, say) is recorded as failed with its
message and the sweep goes on, so one bad cell does not cost the others; the caller reports
the failures. Progress is reported through callbacks: the CLI draws the bars.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from dpfl import runner
from dpfl.data import dataset_info
from dpfl.data.files import locate
from dpfl.errors import DatasetUnavailable, DpflError
from dpfl.reproduce.manifest import Sweep
from dpfl.reproduce.summary import Outcome
from dpfl.spec import RunSpec, parse_spec

__all__ = ["missing_datasets", "run_sweeps"]

OnPoint = Callable[[int, int, str, RunSpec], None]  # (index, total, label, spec) before each point


def missing_datasets(
    sweeps: Sequence[Sweep], *, data_dirs: Sequence[Path], cache_dir: Path | None
) -> list[str]:
    """Returns the datasets the sweeps need whose files are not found, so nothing starts half-way."""
    names = {parse_spec(p.data).dataset.name for s in sweeps for p in s.points}
    missing = []
    for name in sorted(names):
        info = dataset_info(name)
        try:
            locate(list(info.files), search_dirs=list(data_dirs), cache_dir=cache_dir, download=False)
        except DatasetUnavailable:
            missing.append(name)
    return missing


def run_sweeps(
    sweeps: Sequence[Sweep],
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    on_point: OnPoint | None = None,
    on_round: Callable[[runner.Progress], None] | None = None,
) -> list[Outcome]:
    """Returns the outcome of every point of every sweep, run here in order."""
    total = sum(len(s.points) for s in sweeps)
    outcomes, index = [], 0
    for sweep in sweeps:
        for point in sweep.points:
            spec = parse_spec(point.data)
            algorithm, x, variant, seed = sweep.cell(spec.to_json())
            where = dict(setting=sweep.setting, algorithm=algorithm, x=x, variant=variant, seed=seed)
            if on_point is not None:
                label = Outcome(**where, status="running").label
                on_point(index, total, label, spec)
            index += 1
            start = time.perf_counter()
            try:
                result = runner.run(spec, data_dirs=data_dirs, cache_dir=cache_dir, on_round=on_round)
            except DpflError as exc:
                outcomes.append(
                    Outcome(**where, status="failed", error=str(exc), duration_s=time.perf_counter() - start)
                )
                continue
            final, epsilon = result.final, result.epsilon
            outcomes.append(
                Outcome(
                    **where,
                    status="succeeded",
                    accuracy=None if final is None else final.accuracy,
                    loss=None if final is None else final.loss,
                    epsilon=epsilon,
                    target_epsilon=result.privacy.target_epsilon,
                    warning=result.privacy.warning(epsilon),
                    duration_s=result.timings["total_s"],
                    curve=tuple((r.round, r.accuracy, r.loss) for r in result.rounds),
                )
            )
    return outcomes

"""Running a reproduction's sweeps in this process, batch after batch, through `dpfl.runner`.

A sweep's points are grouped as the service groups them (`dpfl.batching`): the points of a
batch are started one by one and trained together. A point that fails to start (an accountant
that cannot answer, say) is recorded as failed with its message and the sweep goes on, so one
bad cell does not cost the others; the caller reports the failures. Progress is reported
through callbacks: the CLI draws the bars.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from dpfl import runner
from dpfl.batching import batches
from dpfl.data import dataset_info
from dpfl.data.files import locate
from dpfl.errors import DatasetUnavailable, DpflError
from dpfl.reproduce.manifest import Sweep
from dpfl.reproduce.summary import Outcome, largest
from dpfl.spec import RunSpec, parse_spec

__all__ = ["missing_files", "run_sweeps"]

OnPoint = Callable[[int, int, str, RunSpec], None]  # (index, total, label, spec) before each point


def missing_files(
    sweeps: Sequence[Sweep], *, data_dirs: Sequence[Path], cache_dir: Path | None
) -> dict[str, list[tuple[str, list[str]]]]:
    """Returns each dataset the sweeps need whose files are not found (or fail their checksum),
    with each folder its missing files go in (under a data folder) and their names, so that
    nothing starts half-way. A dataset may draw on several folders (`digit_domains`: svhn, mnist,
    usps); only the files not found are named."""
    names = {parse_spec(p.data).dataset.name for s in sweeps for p in s.points}
    missing = {}
    for name in sorted(names):
        absent: dict[str, list[str]] = {}
        for spec in dataset_info(name).files:
            try:
                locate([spec], search_dirs=list(data_dirs), cache_dir=cache_dir, download=False)
            except DatasetUnavailable:
                absent.setdefault(spec.folder or name, []).append(spec.basename)
        if absent:
            missing[name] = list(absent.items())
    return missing


def run_sweeps(
    sweeps: Sequence[Sweep],
    *,
    data_dirs: Sequence[Path] = (),
    cache_dir: Path | None = None,
    on_point: OnPoint | None = None,
    on_round: Callable[[runner.Progress], None] | None = None,
    device: torch.device | None = None,
) -> list[Outcome]:
    """Returns the outcome of every point of every sweep, in order, run here batch by batch.

    `on_point` hears each batch before it starts (with its first point's index and spec, and a
    label naming its points); `on_round` hears the rounds of each batch's first run. The runs
    compute on `device` (None: `dpfl.device.resolve_device`'s default).
    """
    total = sum(len(s.points) for s in sweeps)
    outcomes, index = [], 0
    for sweep in sweeps:
        specs = [parse_spec(p.data) for p in sweep.points]
        where = [dict(sweep.cell(spec.to_json())._asdict(), setting=sweep.setting) for spec in specs]
        found: dict[int, Outcome] = {}
        for group in batches(specs):
            if on_point is not None:
                labels = [Outcome(**where[i], status="running").label for i in group]
                label = labels[0] if len(group) == 1 else f"{labels[0]} and {len(group) - 1} more, together"
                on_point(index + group[0], total, label, specs[group[0]])
            started = {}
            for i in group:
                began = time.perf_counter()
                try:
                    started[i] = runner.start(
                        specs[i], data_dirs=data_dirs, cache_dir=cache_dir, device=device
                    )
                except DpflError as exc:
                    duration = time.perf_counter() - began
                    found[i] = Outcome(**where[i], status="failed", error=str(exc), duration_s=duration)
            hear = [on_round if k == 0 else None for k in range(len(started))]
            began = time.perf_counter()
            try:
                results = runner.train(list(started.values()), on_round=hear)
            except DpflError as exc:  # a round refused: the batch's runs fail together
                duration = time.perf_counter() - began
                for i in started:
                    found[i] = Outcome(**where[i], status="failed", error=str(exc), duration_s=duration)
                continue
            for i, result in zip(started, results, strict=True):
                found[i] = _succeeded(where[i], result)
        outcomes += [found[i] for i in range(len(specs))]
        index += len(specs)
    return outcomes


def _succeeded(where: dict, result: runner.RunResult) -> Outcome:
    final, epsilon = result.final, result.epsilon
    metric = dataset_info(result.spec.dataset.name).metric  # Creditcard's is balanced accuracy
    return Outcome(
        **where,
        status="succeeded",
        accuracy=None if final is None else final.headline(metric),
        loss=None if final is None else final.loss,
        train_loss=None if final is None else final.diagnostics.get("train_loss"),
        epsilon=epsilon,
        target_epsilon=result.privacy.target_epsilon,
        sigma=largest(result.privacy.noise_multiplier),
        warning=result.privacy.warning(epsilon),
        # its own time: its set-up, and its share of its batch's rounds and its evaluations
        duration_s=sum(result.timings[k] for k in ("setup_s", "train_s", "eval_s")),
        curve=tuple((r.round, r.headline(metric), r.loss) for r in result.rounds),
    )

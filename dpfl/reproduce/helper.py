"""A batch's projections shared between this process and a helper process, before it trains.

Each run of a sweep is projected before it trains (`runner.project`: σ calibrated to its ε
target, the planned ε per round): pure Python in dp-accounting, up to a second per distinct
target, while nothing trains and the second core idles. Runs that differ only in their seed
share one calibration, so they form a class, projected by one process. Of each batch's new
classes this process takes them from the front as its runs start, and the helper from the back,
one at a time. The helper stores what it projects where `runner.start` reads earlier
projections (`dpfl.privacy.calibration.stored`, under the download folder), and hands back the
RDP values it computed for the runs' releases (`rdp.known_values`), which this process's ledger
needs again for the runs' records. So every number is the one this process would have computed;
a run the helper could not project is projected by `runner.start` itself, which reports the
error as it would have.

Only between batches: a helper projecting while a batch trains, beside torch's two threads,
slowed the 63 runs of `dpfl reproduce isrl` from 30.1–31.8 s to 36.9–37.7 s.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import numpy as np

from dpfl.spec import RunSpec

__all__ = ["ProjectionHelper"]


class ProjectionHelper:
    """Shares each batch's projections with a helper process; a context manager around it.

    Runs that differ only in their seed form a class that shares one calibration: a class is
    projected by one process, every run of it at once. Of a batch's new classes this process
    takes them from the front (`claim`, as its runs start) and the helper from the back, one at
    a time, so neither waits on the other while a class is left to take.

    Without a download folder to store projections in, or in a daemon process (a Celery
    worker's, which may not start children), there is no helper and every class is this
    process's own.
    """

    def __init__(self, specs: Sequence[RunSpec], *, data_dirs: Sequence[Path], cache_dir: Path | None):
        self._data_dirs, self._cache_dir = list(data_dirs), cache_dir
        self._pool: ProcessPoolExecutor | None = None
        if cache_dir is not None and not multiprocessing.current_process().daemon:
            # spawn: this process may have run torch's OpenMP threads, which a fork cannot reuse
            self._pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_begin,
                initargs=(logging.getLogger("absl").getEffectiveLevel(),),
            )
        self._members: dict[str, list[str]] = {}  # class ↦ its runs' specs (JSON)
        for spec in specs:
            self._members.setdefault(_class_of(spec), []).append(spec.model_dump_json())
        # A class is untaken (in `_untaken`), the helper's (its task in `_tasks`) or ours (done).
        self._untaken: list[str] = []
        self._tasks: dict[str, Future] = {}
        self._seen: set[str] = set()
        self._busy = False
        self._lock = threading.RLock()  # the helper's task ends on the executor's thread

    def share(self, specs: Sequence[RunSpec]) -> None:
        """Offers the helper a batch's classes not seen before."""
        with self._lock:
            for key in map(_class_of, specs):
                if key not in self._seen:
                    self._seen.add(key)
                    self._untaken.append(key)
            self._give()

    def claim(self, spec: RunSpec) -> None:
        """Returns when `spec` may start: its class is taken here if untaken, or the helper has
        projected it and this process has learnt the RDP values it computed. An error is left
        for `runner.start` to meet."""
        from dpfl.privacy.accountants import rdp

        key = _class_of(spec)
        with self._lock:
            if key in self._untaken:
                self._untaken.remove(key)
            task = self._tasks.pop(key, None)
        if task is not None and task.exception() is None:
            rdp.learn(task.result())

    def _give(self) -> None:
        """Gives the helper the last untaken class, unless it is busy (call with the lock held)."""
        if self._pool is None or self._busy or not self._untaken:
            return
        key = self._untaken.pop()
        try:
            task = self._pool.submit(_project, self._members[key], self._data_dirs, self._cache_dir)
        except RuntimeError:  # the helper is gone (BrokenProcessPool) or shut down: ours then
            self._pool = None
            return
        self._tasks[key] = task
        self._busy = True
        task.add_done_callback(self._done)

    def _done(self, _task: Future) -> None:
        with self._lock:
            self._busy = False
            self._give()

    def __enter__(self) -> ProjectionHelper:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _class_of(spec: RunSpec) -> str:
    return spec.model_copy(update={"seed": 0}).model_dump_json()


def _begin(absl_level: int) -> None:
    """Starts the helper: dp-accounting's notes as quiet as here (the CLI silences them), and one
    torch thread (the data and model need little torch; the trainer keeps its threads)."""
    import torch

    logging.getLogger("absl").setLevel(absl_level)
    torch.set_num_threads(1)


def _project(spec_jsons: list[str], data_dirs: list[Path], cache_dir: Path) -> dict:
    """In the helper: projects the runs of one class, stores each projection, and returns the RDP
    values of their planned releases."""
    from dpfl import runner
    from dpfl.errors import DpflError
    from dpfl.privacy.accountants import rdp
    from dpfl.privacy.calibration.stored import store_of
    from dpfl.spec import parse_spec

    events = []
    for text in spec_jsons:
        try:
            algorithm = runner.prepare(parse_spec(json.loads(text)), data_dirs=data_dirs, cache_dir=cache_dir)
            noise = runner.project(algorithm, store=store_of(cache_dir)).noise_multiplier
        except DpflError:
            continue  # `runner.start` meets it again and reports it
        if noise is not None:
            plan = algorithm.plan(np.asarray(noise, dtype=float) if isinstance(noise, list) else noise)
            events += plan.party_events().values()
    return rdp.known_values(events)

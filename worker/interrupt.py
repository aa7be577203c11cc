"""Cancel that reaches a run in the middle of its work, not only between rounds.

A run's start (loading data, calibrating σ, a Paillier key set-up) and a round (the weighting
protocol's exponentiations) can each take minutes, and the cancel flag was read only between
rounds. So the worker's task marks the parts it computes as *sections*; the heartbeat thread,
which reads the cancel flags, raises `RunCancelled` in the task's thread while it is inside one
(`PyThreadState_SetAsyncExc`: it lands at the next bytecode, like Celery's soft time limit,
inside our code or the accountants' Python loops alike). Outside a section (writing a round's
rows, settling a budget) nothing is raised: a pending exception is withdrawn as the section ends.

A section computes nothing that is released: a round's releases reach the ledger only once the
round returns, so a run interrupted inside one has released exactly what its ledger holds.

An asynchronous exception lands only when the thread runs Python again: a call blocked in C
(a hung native library, a sleep, a socket) never sees it. `stuck` names the runs of such a
section, and the worker then records them cancelled and ends its pool process (`worker.execution`).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Iterator

__all__ = ["Interrupter", "RunCancelled"]


class RunCancelled(BaseException):
    """Raised inside a section of a run whose cancel was asked for."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


class Interrupter:
    """The sections of one task's thread, each for some of its runs, and the interrupt of each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self._runs: frozenset[str] = frozenset()
        self._delivered = False
        self._delivered_at = 0.0

    @contextlib.contextmanager
    def section(self, run_ids: list[str]) -> Iterator[None]:
        """Marks the body, which works for `run_ids`, as interruptible (called in the task's thread)."""
        with self._lock:
            self._thread, self._runs, self._delivered = threading.get_ident(), frozenset(run_ids), False
        try:
            yield
        finally:
            # bounded: an interrupt landing between the acquire and the release must not wedge
            # the heartbeat thread, which takes this lock too
            if self._lock.acquire(timeout=1.0):
                try:
                    if self._thread is not None:
                        _raise_in(self._thread, None)  # withdraw one that has not landed yet
                    self._thread = None
                finally:
                    self._lock.release()

    def interrupt(self, cancelled: set[str]) -> bool:
        """Raises RunCancelled in the task's thread if it is inside a section whose runs have all
        been cancelled (a batch's other runs go on); returns whether it did."""
        if not self._lock.acquire(timeout=1.0):
            return False
        try:
            if self._thread is None or self._delivered or not self._runs <= cancelled:
                return False
            self._delivered, self._delivered_at = True, time.monotonic()
            _raise_in(self._thread, RunCancelled)
            return True
        finally:
            self._lock.release()

    def stuck(self, after_s: float) -> frozenset[str]:
        """Returns the runs of the section whose interrupt was raised more than `after_s` ago and
        has not landed (the thread is blocked in C code); none otherwise."""
        if not self._lock.acquire(timeout=1.0):
            return frozenset()
        try:
            late = self._delivered and time.monotonic() - self._delivered_at > after_s
            return self._runs if self._thread is not None and late else frozenset()
        finally:
            self._lock.release()

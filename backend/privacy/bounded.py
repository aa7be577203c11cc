"""Projections with a time and memory bound, in a small pool of processes of the API's own.

A projection accounts a spec's whole plan and can calibrate σ, so its cost grows with rounds,
silos and 1/σ², and the accountants are C and numpy code that a thread cannot interrupt. So
the API projects in child processes (spawned, so they do not inherit the server's threads),
each with an address-space limit and its own caches (datasets, accountant curves):

- `start` spawns `processes` of them with the API and waits until each has imported what a
  projection needs (torch, the accountants, scikit-learn's bundled datasets: 5–17 s cold), so
  the first request answers like the second.
- A request takes an idle process; waiting for one does not count against `timeout_s`, which
  bounds the projection's own computing. A projection that outlasts it kills its process alone
  (a fresh one is spawned and warmed before it takes requests) and is refused with 422 naming
  the spec's field; the other processes and the requests they serve go on.
- Identical requests in flight share one answer.

`stop()` kills them all at once: on SIGTERM (see `install_stop_on_sigterm`) a request that
waits for a projection answers 503, so the server can exit without waiting for it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import multiprocessing
import os
import queue
import resource
import signal
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from backend import lifeline
from backend.errors import AppError
from dpfl.errors import SpecError

__all__ = ["ProjectionUnavailable", "call", "install_stop_on_sigterm", "shutdown", "start", "stop"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_WAIT_S = 0.2  # how often a waiting request checks whether the server is stopping


class ProjectionUnavailable(AppError):
    """The projection processes were stopped (the server is shutting down) or one died; try again."""

    status_code = 503


def _limit_memory(memory_bytes: int) -> None:  # runs in the child, before any projection
    lifeline.exit_when_orphaned()  # the server killed outright: this process goes with it
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops it; Ctrl-C goes to the group


def _warm() -> None:  # runs in the child: what every projection imports, before the first request
    import sklearn.datasets  # noqa: F401  (the bundled datasets' loader: 2–3 s of imports)

    import backend.runs.service  # noqa: F401  (dpfl.runner, torch, the accountants)


class _Slot:
    """One projection process: an executor of one worker, replaced whole when it is killed."""

    def __init__(self, memory_bytes: int):
        self.executor = cf.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_memory,
            initargs=(memory_bytes,),
        )
        self.warmed = self.executor.submit(_warm)

    def kill(self) -> None:
        for process in list((self.executor._processes or {}).values()):  # the executor has no public kill
            with contextlib.suppress(ProcessLookupError, AttributeError):
                os.kill(process.pid, signal.SIGKILL)
        self.executor.shutdown(wait=False, cancel_futures=True)


class _Pool:
    """The projection processes and the requests in flight on them."""

    def __init__(self, processes: int, memory_bytes: int):
        self.memory_bytes = memory_bytes
        self.idle: queue.Queue[_Slot] = queue.Queue()
        self.slots: set[_Slot] = set()
        self.lock = threading.Lock()
        self.closed = False
        for _ in range(processes):
            self._add()

    def _add(self) -> None:
        slot = _Slot(self.memory_bytes)
        with self.lock:
            self.slots.add(slot)
        # idle once warm: a request never waits on another's warm-up inside its own time limit (a
        # warm-up that failed leaves the slot to fail its first request, which names the cause)
        slot.warmed.add_done_callback(lambda _: self.idle.put(slot) if slot in self.slots else None)

    def replace(self, slot: _Slot) -> None:
        with self.lock:
            self.slots.discard(slot)
        slot.kill()
        if not self.closed:
            self._add()

    def wait_warm(self, timeout_s: float) -> None:
        for slot in list(self.slots):
            with contextlib.suppress(Exception):
                slot.warmed.result(timeout=timeout_s)

    def kill(self) -> None:
        with self.lock:
            self.closed = True
            slots, self.slots = list(self.slots), set()
        for slot in slots:
            slot.kill()


_lock = threading.Lock()
_pool: _Pool | None = None
_inflight: dict[Hashable, cf.Future] = {}  # (fn, args) ↦ the answer every identical call waits for
_config = {"processes": 2, "memory_bytes": 0}
_stopping = threading.Event()


def start(*, processes: int, memory_bytes: int, warm_timeout_s: float = 120.0) -> None:
    """Spawns the projection processes and returns once each has warmed (the app's start-up)."""
    global _pool
    with _lock:
        _config.update(processes=max(processes, 1), memory_bytes=memory_bytes)
        if _pool is None:
            _pool = _Pool(_config["processes"], memory_bytes)
        pool = _pool
    pool.wait_warm(warm_timeout_s)


def _get_pool(memory_bytes: int) -> _Pool:
    global _pool
    with _lock:
        if _pool is None:  # not started with the app (a test's app): started at the first call
            _config["memory_bytes"] = memory_bytes
            _pool = _Pool(_config["processes"], memory_bytes)
        return _pool


def shutdown() -> None:
    """Kills the projection processes (the app's shutdown); a later call starts new ones."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.kill()


def stop() -> None:
    """Kills the projection processes for good (the server got SIGTERM): waiting requests answer 503."""
    _stopping.set()
    shutdown()


def call(fn: Callable[..., T], *args: Any, timeout_s: float, memory_bytes: int) -> T:
    """Returns fn(*args) computed in a projection process, within `timeout_s` of its computing
    and `memory_bytes`; a call with the same fn and args in flight is answered by the same result.

    `timeout_s` ≤ 0 runs it here, unbounded (the command line's own projections).

    Raises:
        SpecError: on `privacy` when the projection takes too long or too much memory (422);
            and whatever `fn` raised (its DpflErrors pickle whole).
        ProjectionUnavailable: the server is stopping, or the process died (503).
    """
    if timeout_s > 0 and _stopping.is_set():
        raise ProjectionUnavailable("the server is shutting down; projections are not taken")
    key = (fn, args)
    with _lock:
        shared = _inflight.get(key)
        if shared is None:
            _inflight[key] = answer = cf.Future()
    if shared is not None:
        return shared.result() if timeout_s <= 0 else _wait(shared, deadline=None, slot=None, pool=None)
    try:
        result = fn(*args) if timeout_s <= 0 else _compute(_get_pool(memory_bytes), fn, args, timeout_s)
    except BaseException as exc:
        answer.set_exception(exc)
        raise
    else:
        answer.set_result(result)
        return result
    finally:
        with _lock:
            _inflight.pop(key, None)


def _compute(pool: _Pool, fn: Callable[..., T], args: tuple, timeout_s: float) -> T:
    """Returns fn(*args) from an idle process of `pool`, waited for as long as it takes."""
    while True:
        if _stopping.is_set():
            raise ProjectionUnavailable("the server is shutting down; the projection was stopped")
        with contextlib.suppress(queue.Empty):
            slot = pool.idle.get(timeout=_WAIT_S)
            break
    try:
        future = slot.executor.submit(fn, *args)
    except (RuntimeError, cf.BrokenExecutor):  # killed while idle (the server is stopping)
        raise ProjectionUnavailable("the projection process stopped; try again") from None
    return _wait(future, deadline=time.monotonic() + timeout_s, slot=slot, pool=pool, timeout_s=timeout_s)


def _wait(
    future: cf.Future,
    *,
    deadline: float | None,
    slot: _Slot | None,
    pool: _Pool | None,
    timeout_s: float = 0.0,
) -> Any:
    """Returns the future's result; with a slot, kills it past `deadline` and gives it back after."""
    while True:
        try:
            left = _WAIT_S if deadline is None else min(_WAIT_S, max(deadline - time.monotonic(), 0.0))
            result = future.result(timeout=left)
        except cf.TimeoutError:
            if _stopping.is_set():
                raise ProjectionUnavailable(
                    "the server is shutting down; the projection was stopped"
                ) from None
            if deadline is not None and time.monotonic() >= deadline:
                pool.replace(slot)
                raise SpecError(
                    "privacy",
                    f"took longer than {timeout_s:g} s to project (this server's limit, "
                    "DPFL_PROJECTION_TIMEOUT_S); give a larger noise multiplier, fewer rounds or "
                    "silos, or use the rdp accountant.",
                ) from None
            continue
        except MemoryError:
            _give_back(pool, slot)
            raise SpecError(
                "privacy",
                f"needs more than {pool.memory_bytes / 2**30:g} GiB to project (this server's limit, "
                "DPFL_PROJECTION_MEMORY_MB); give a larger noise multiplier, fewer rounds or "
                "silos, or use the rdp accountant.",
            ) from None
        except cf.BrokenExecutor:
            if slot is not None:
                pool.replace(slot)
            if _stopping.is_set():
                raise ProjectionUnavailable(
                    "the server is shutting down; the projection was stopped"
                ) from None
            log.error("a projection process died; a new one is started")
            raise ProjectionUnavailable("the projection process died; try again") from None
        except cf.CancelledError:
            raise ProjectionUnavailable("the server is shutting down; the projection was stopped") from None
        except BaseException:
            _give_back(pool, slot)
            raise
        _give_back(pool, slot)
        return result


def _give_back(pool: _Pool | None, slot: _Slot | None) -> None:
    if pool is not None and slot is not None and slot in pool.slots:
        pool.idle.put(slot)


def install_stop_on_sigterm() -> None:
    """Chains `stop()` before the SIGTERM and SIGINT handlers in place (uvicorn's, once it serves).

    uvicorn's graceful shutdown waits for requests in flight; one waiting for a projection
    would hold the server for as long as the projection runs. Only in the main thread (the
    server's); elsewhere (tests' TestClient) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            stop()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)

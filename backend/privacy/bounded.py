"""Projections with a time and memory bound: each runs in a process of the API's own.

A projection accounts a spec's whole plan and can calibrate σ, so its cost grows with rounds,
silos and 1/σ², and the accountants are C and numpy code that a thread cannot interrupt. So
the API projects in one child process (spawned, so it does not inherit the server's threads),
with an address-space limit; a projection that outlasts `timeout_s` kills the process (a new
one starts at the next call) and is refused with 422 naming `privacy`. The child keeps its
own caches (datasets, accountant curves) between calls.

`stop()` kills the child at once: on SIGTERM (see `install_stop_on_sigterm`) a request that
waits for a projection answers 503, so the server can exit without waiting for it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from backend.errors import AppError
from dpfl.errors import SpecError

__all__ = ["ProjectionUnavailable", "call", "install_stop_on_sigterm", "shutdown", "stop"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_WAIT_S = 0.2  # how often a waiting request checks whether the server is stopping

_lock = threading.Lock()
_pool: cf.ProcessPoolExecutor | None = None
_stopping = threading.Event()


class ProjectionUnavailable(AppError):
    """The projection process was stopped (the server is shutting down) or died; try again."""

    status_code = 503


def _limit_memory(memory_bytes: int) -> None:  # runs in the child, before any projection
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops it; Ctrl-C goes to the group


def _get_pool(memory_bytes: int) -> cf.ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = cf.ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_memory,
                initargs=(memory_bytes,),
            )
        return _pool


def _kill(pool: cf.ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    for process in list((pool._processes or {}).values()):  # the executor has no public kill
        with contextlib.suppress(ProcessLookupError, AttributeError):
            os.kill(process.pid, signal.SIGKILL)
    pool.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """Kills the projection process (the app's shutdown); a later call starts a new one."""
    pool = _pool
    if pool is not None:
        _kill(pool)


def stop() -> None:
    """Kills the projection process for good (the server got SIGTERM): waiting requests answer 503."""
    _stopping.set()
    shutdown()


def call(fn: Callable[..., T], *args: Any, timeout_s: float, memory_bytes: int) -> T:
    """Returns fn(*args) computed in the projection process, within `timeout_s` and `memory_bytes`.

    `timeout_s` ≤ 0 runs it here, unbounded (the command line's own projections).

    Raises:
        SpecError: on `privacy` when the projection takes too long or too much memory (422);
            and whatever `fn` raised (its DpflErrors pickle whole).
        ProjectionUnavailable: the server is stopping, or the process died (503).
    """
    if timeout_s <= 0:
        return fn(*args)
    if _stopping.is_set():
        raise ProjectionUnavailable("the server is shutting down; projections are not taken")
    pool = _get_pool(memory_bytes)
    try:
        future = pool.submit(fn, *args)
    except (RuntimeError, cf.BrokenExecutor):  # killed between _get_pool and submit
        raise ProjectionUnavailable("the projection process stopped; try again") from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return future.result(timeout=min(_WAIT_S, max(deadline - time.monotonic(), 0.0)))
        except cf.TimeoutError:
            if _stopping.is_set():
                raise ProjectionUnavailable(
                    "the server is shutting down; the projection was stopped"
                ) from None
            if time.monotonic() >= deadline:
                _kill(pool)
                raise SpecError(
                    "privacy",
                    f"took longer than {timeout_s:g} s to project (this server's limit, "
                    "DPFL_PROJECTION_TIMEOUT_S); give a larger noise multiplier, fewer rounds or "
                    "silos, or use the rdp accountant.",
                ) from None
        except MemoryError:
            raise SpecError(
                "privacy",
                f"needs more than {memory_bytes / 2**30:g} GiB to project (this server's limit, "
                "DPFL_PROJECTION_MEMORY_MB); give a larger noise multiplier, fewer rounds or "
                "silos, or use the rdp accountant.",
            ) from None
        except cf.BrokenExecutor:
            _kill(pool)
            if _stopping.is_set():
                raise ProjectionUnavailable(
                    "the server is shutting down; the projection was stopped"
                ) from None
            log.error("the projection process died; a new one starts with the next projection")
            raise ProjectionUnavailable("the projection process died; try again") from None
        except cf.CancelledError:
            raise ProjectionUnavailable("the server is shutting down; the projection was stopped") from None


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

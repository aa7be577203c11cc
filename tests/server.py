"""`dpfl up` as a user starts it, for tests that need the whole app behind a real port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """Returns a TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dpfl_up(
    home: Path,
    *,
    timeout_s: float = 90,
    demo: bool = False,
    workers: int = 1,
    env: dict[str, str] | None = None,
    started: list | None = None,
) -> Iterator[str]:
    """Runs `dpfl up` (API and `workers` workers, embedded SQLite and broker) in `home`; yields its
    URL. With `demo`, as `make up` runs it: the demo sweep is queued on start.

    Only DPFL_DATA_DIR (and the suite's DPFL_PROJECTION_PROCESSES) is kept from the environment,
    so the app runs on its embedded defaults; `env` adds variables (e.g. DPFL_PLUGINS). The
    process is appended to `started`, when given.
    """
    port = free_port()
    extra = env or {}
    kept = ("DPFL_DATA_DIR", "DPFL_PROJECTION_PROCESSES")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPFL_") or k in kept}
    env |= {"DPFL_HOME": str(home), "DPFL_PORT": str(port), **extra}
    with (home / "up.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dpfl", "up", "--workers", str(workers), *(["--demo"] if demo else [])],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if started is not None:
        started.append(proc)
    url, deadline = f"http://127.0.0.1:{port}", time.time() + timeout_s
    try:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/runs", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"dpfl up did not start:\n{(home / 'up.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

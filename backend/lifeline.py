"""Children that die with the process that started them.

`dpfl up` starts its workers and the API's projection processes. Stopped in order (Ctrl-C,
SIGTERM) it stops them; killed outright (SIGKILL, the OOM killer) it cannot, and they went on as
orphans (a worker, its pool and a 357 MB projection process). So each child watches its parent:
a worker through the kernel (Linux's parent-death signal, set between fork and exec), and a
projection process, started by `multiprocessing` from whichever thread, through a thread that
notices when its parent is gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

__all__ = ["exit_when_orphaned", "signal_when_orphaned"]

_PR_SET_PDEATHSIG = 1
_POLL_S = 1.0


def signal_when_orphaned(sig: int) -> None:
    """Asks the kernel to send `sig` to this process when its parent dies (Linux; elsewhere
    nothing). Call it in the child, before exec (`subprocess.Popen(preexec_fn=…)`): the signal
    survives exec."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request was made
        os.kill(os.getpid(), sig)


def exit_when_orphaned() -> None:
    """Starts a daemon thread that ends this process as soon as its parent is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(_POLL_S)
        os.kill(os.getpid(), signal.SIGKILL)  # nothing of a projection is worth keeping

    threading.Thread(target=watch, daemon=True, name="lifeline").start()

"""`dpfl up` killed outright (SIGKILL, the OOM killer) takes its children with it: its workers with
their pool processes, and its projection processes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.server import dpfl_up

pytestmark = [pytest.mark.service, pytest.mark.slow]


def _children() -> dict[int, list[int]]:
    """Returns parent pid ↦ its live children's pids (zombies are dead)."""
    out: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            out.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return out


def descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    live = {p for ps in _children().values() for p in ps}
    return pids & live


def test_dpfl_up_killed_outright_leaves_no_process_behind(tmp_path):
    started: list = []
    with dpfl_up(tmp_path, workers=1, env={"DPFL_PROJECTION_PROCESSES": "1"}, started=started):
        (up,) = started
        deadline = time.time() + 60
        while (
            len(family := descendants(up.pid)) < 3 and time.time() < deadline
        ):  # worker, its pool, projection
            time.sleep(0.3)
        assert len(family) >= 3, family
        os.kill(up.pid, signal.SIGKILL)  # the API process alone, not its group
        up.wait(timeout=10)
        deadline = time.time() + 30
        while alive(family) and time.time() < deadline:
            time.sleep(0.3)
        assert not alive(family), {p: Path(f"/proc/{p}/cmdline").read_text() for p in alive(family)}

"""Test-wide set-up: absl (inside dp_accounting) logs a warning per excluded RDP order; silence it.
Under pytest-xdist (`make test` runs three processes) the browser tests stay in two groups, each in
one process, so each group shares one `dpfl up` and one Chromium instead of starting one per test
file, and each process takes its share of the cores for torch's intra-op threads."""

import logging
import os
from pathlib import Path

import pytest

logging.getLogger("absl").setLevel(logging.ERROR)

# The suite's processes (pytest-xdist's three, and the servers, workers and projection processes
# its tests start, which inherit this) outnumber the cores. OpenMP threads that spin while they
# wait at a barrier then burn the cores the other processes need (`make test` used 844 s of CPU
# with passive waiting against 885 s without). It must be set before torch is first imported
# in a process, so here, not in a fixture.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every app a test starts warms its projection processes (torch and scikit-learn imported, about
# 6 s of CPU each); one each is enough here, where nothing previews in parallel except the test
# that sets two. The servers the tests start as a user would get it too (tests/server.py).
os.environ.setdefault("DPFL_PROJECTION_PROCESSES", "1")

BROWSER = Path(__file__).parent / "browser"


def pytest_configure(config: pytest.Config) -> None:
    # Three processes with two intra-op threads each on two cores: OpenMP threads spin-wait for
    # peers that are descheduled, and a ULDP-AVG batching test took 27 s in `make test` against
    # 2.9 s alone.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        share = max(1, (os.cpu_count() or 1) // workers)
        # and the processes the tests start, which take every core unless told (a child's small
        # parallel ops each waited out a scheduler's time slice for a descheduled peer); those
        # that set their threads (a worker's DPFL_TORCH_THREADS) still do
        os.environ.setdefault("OMP_NUM_THREADS", str(share))
        import torch

        torch.set_num_threads(share)


# The browser tests in two groups of about equal time, each kept in one process with its own
# `dpfl up` and Chromium: in one group they were the suite's longest chain of tests.
BROWSER_SECOND = {
    "test_compare.py",
    "test_app.py",
    "test_overlay.py",
    "test_run_page.py",
    "test_runs_list.py",
    "test_new_sweep.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER in item.path.parents:
            group = "browser-2" if item.path.name in BROWSER_SECOND else "browser-1"
            item.add_marker(pytest.mark.xdist_group(group))

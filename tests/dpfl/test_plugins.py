"""`DPFL_PLUGINS` names modules whose import registers parts; a missing one is one error line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dpfl(*args: str, plugins: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DPFL_PLUGINS": plugins}
    return subprocess.run(
        [sys.executable, "-m", "dpfl", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_plugin_module_registers_its_algorithm():
    done = _dpfl("algorithms", "--json", plugins=" tests.toy_plugin ,")
    assert done.returncode == 0, done.stderr
    assert '"name": "toy_average"' in done.stdout


def test_a_missing_plugin_is_one_error_line():
    done = _dpfl("algorithms", plugins="tests.no_such_plugin")
    assert done.returncode == 1
    assert done.stderr == (
        "error: plugin 'tests.no_such_plugin' (DPFL_PLUGINS or a dpfl.plugins entry point) "
        "is not an importable module\n"
    )

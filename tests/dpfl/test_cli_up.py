"""`dpfl up` refuses to serve beyond loopback without tokens, however the host is given."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case starts the installed command in a process of its own

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = (
    "error: binding to {host} exposes the API beyond this machine without authentication; "
    "set DPFL_API_TOKENS (comma-separated bearer tokens) or bind to 127.0.0.1 (--host / DPFL_HOST)\n"
)


def dpfl_up(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DPFL_")}
    return subprocess.run(
        [sys.executable, "-m", "dpfl", "up", "--workers", "0", *args],
        cwd=ROOT,
        env=clean | {"DPFL_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("args", "env", "host"),
    [
        (("--host", "::"), {}, "::"),
        (("--host", "192.168.1.7"), {"DPFL_HOST": "127.0.0.1"}, "192.168.1.7"),
        ((), {"DPFL_HOST": "0.0.0.0"}, "0.0.0.0"),
    ],
)
def test_a_bind_beyond_loopback_without_tokens_is_one_error_line(tmp_path, args, env, host):
    done = dpfl_up(tmp_path, *args, **env)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", REFUSAL.format(host=host))
    assert not (tmp_path / "dpfl.db").exists()  # refused before anything was touched


def test_the_flag_wins_over_the_environment(tmp_path):
    # --host 127.0.0.1 with DPFL_HOST=0.0.0.0: the flag wins, so this bind passes the check; the
    # port is taken, so the server then stops, which shows that the check passed.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        # projections in-process: the API's start would otherwise warm its projection processes
        # (seconds) before uvicorn meets the taken port
        done = dpfl_up(
            tmp_path,
            "--host",
            "127.0.0.1",
            "--port",
            port,
            DPFL_HOST="0.0.0.0",
            DPFL_PROJECTION_TIMEOUT_S="0",
        )
    assert "exposes the API" not in done.stderr
    assert f"DP-FL Explorer on http://127.0.0.1:{port}" in done.stdout
    assert (tmp_path / "dpfl.db").exists()


def test_a_home_the_disk_refuses_is_one_error_line(tmp_path):
    done = dpfl_up(tmp_path, DPFL_HOME="/sys/kernel/dpfl")  # sysfs: read-only, even for root
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr == "error: Operation not permitted: '/sys/kernel/dpfl'\n"


def test_a_plugin_that_raises_is_one_error_line(tmp_path):
    (tmp_path / "raising_plugin.py").write_text('raise RuntimeError("its registry is broken")\n')
    done = dpfl_up(tmp_path, DPFL_PLUGINS="raising_plugin", PYTHONPATH=f"{ROOT}:{tmp_path}")
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr == (
        "error: plugin 'raising_plugin' (DPFL_PLUGINS or a dpfl.plugins entry point) failed to import: "
        "RuntimeError: its registry is broken (dpfl --debug shows where)\n"
    )

"""The CLI imports what a command needs when it runs: `dpfl --help` loads neither torch nor the
accountants, and `dpfl privacy …` loads the accountants but not torch (their times are in
benchmarks/cli.py; here, what is imported, which does not depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the service's plugin (backend.cli) adds its commands on every start; the service's libraries
# load only when one of them runs; nor does a command load the reproduction's configs (0.2 s)
HEAVY = (
    "torch",
    "dp_accounting",
    "scipy",
    "plotly",
    "sklearn",
    "fastapi",
    "sqlalchemy",
    "celery",
    "dpfl.reproduce",
)
# what the RDP accountant does not need: dp_accounting's package __init__ would load them (dpfl.privacy.dpa)
NOT_FOR_RDP = (
    "dp_accounting.pld",
    "dp_accounting.mechanism_calibration",
    "scipy.signal",
    "scipy.stats",
    "scipy.optimize",
)

PROBE = """
import json, sys
from dpfl.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def loaded(*argv: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["reproduce", "--help"],
        ["privacy", "--help"],
        ["up", "--help"],
        ["audit", "--help"],
    ],
)
def test_help_loads_no_heavy_module(argv):
    assert loaded(*argv) == []


def test_privacy_commands_load_the_accountants_but_not_torch():
    argv = ["privacy", "epsilon", "--noise-multiplier", "1.1", "--steps", "10", "--delta", "1e-5"]
    assert loaded(*argv) == ["dp_accounting", "scipy"]
    assert loaded(*argv, heavy=NOT_FOR_RDP) == []
    assert "torch" not in loaded("privacy", "vote", "--sigma", "40", "--queries", "100", "--delta", "1e-5")


PROJECTION = """
import json, sys
from dpfl.runner import prepare, project
from tests.factories import isrl_digits_spec
project(prepare(isrl_digits_spec(dataset={{"name": "synthetic", "silos": 10}})))
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def test_a_projection_loads_neither_the_auditors_statistics_nor_the_pld():
    # its caveats ask whether the auditor covers the algorithm (dpfl.projection.auditable); that
    # once loaded the trials' statistics, scipy.stats: about 1 s of every run's set-up (issue 43)
    proc = subprocess.run(
        [sys.executable, "-c", PROJECTION.format(heavy=NOT_FOR_RDP)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []

"""dp-accounting through dpfl.privacy.dpa: its submodules load alone, and the package is whole for
anyone who asks it for a top-level name afterwards."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import dpfl.privacy
from dpfl.privacy.accountants import make_accountant
from dpfl.privacy.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
rdp = make_accountant("rdp")
rdp.compose(SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 1000))
print(repr(rdp.epsilon(1e-5)))
print(sorted(m for m in ("dp_accounting.pld", "dp_accounting.mechanism_calibration") if m in sys.modules))
import dp_accounting
from dp_accounting import NeighboringRelation
accountant = dp_accounting.rdp.RdpAccountant()
step = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
accountant.compose(dp_accounting.SelfComposedDpEvent(step, 1000))
print(float(accountant.get_epsilon(1e-5)), NeighboringRelation.REPLACE_ONE.name)
print(dp_accounting.pld.PLDAccountant.__name__, dp_accounting.calibrate_dp_mechanism.__name__)
pld = make_accountant("pld")
pld.compose(GaussianEvent(1.0))
print(repr(pld.epsilon(1e-5)))
"""


def _probe(code: str) -> list[str]:
    """Returns what `code` prints, run in a fresh interpreter (the package is registered once per process)."""
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return run.stdout.strip().splitlines()


def test_the_rdp_path_loads_no_pld_and_the_package_completes_on_demand():
    ours, not_loaded, theirs, names, pld = _probe(PROBE)
    assert not_loaded == "[]"
    assert 1.70 < float(ours) < 1.72  # README: σ = 1.1, q = 0.01, 1,000 steps, δ = 1e-5
    # dp_accounting's own RDP accountant, reached through the completed package, agrees to the orders' grid
    assert abs(float(theirs.split()[0]) - float(ours)) < 0.05
    assert theirs.split()[1] == "REPLACE_ONE"
    assert names == "PLDAccountant calibrate_dp_mechanism"
    assert 4.3 < float(pld) < 4.5  # a Gaussian with σ = 1 at δ = 1e-5 (4.36 analytically)


def test_another_thread_waits_for_the_package_to_complete():
    lines = _probe(
        """
import threading
import dpfl.privacy
import dp_accounting
seen, go = [], threading.Event()
def first():
    go.set()
    dp_accounting.calibrate_dp_mechanism  # runs the real __init__ (it loads scipy: ~1 s)
def second():
    go.wait()
    try:
        seen.append(dp_accounting.GaussianDpEvent.__name__)
    except AttributeError as exc:
        seen.append(repr(exc))
threads = [threading.Thread(target=first), threading.Thread(target=second)]
[t.start() for t in threads]
[t.join() for t in threads]
print(seen[0])
"""
    )
    assert lines == ["GaussianDpEvent"]


def test_a_failed_init_can_be_retried_and_star_import_and_dir_see_the_whole_package():
    lines = _probe(
        """
import sys
import dpfl.privacy
import dp_accounting
sys.modules["scipy.signal"] = None  # the real __init__ fails as an interrupted import would
try:
    dp_accounting.GaussianDpEvent
except ImportError:
    print("failed")
del sys.modules["scipy.signal"]
print(dp_accounting.GaussianDpEvent.__name__)
print("NeighboringRelation" in dir(dp_accounting))
names = {}
exec("from dp_accounting import *", names)
print("PoissonSampledDpEvent" in names, "calibrate_dp_mechanism" in names)
"""
    )
    assert lines == ["failed", "GaussianDpEvent", "True", "True True"]


def test_star_import_alone_sees_the_whole_package():
    lines = _probe(
        """
import dpfl.privacy
names = {}
exec("from dp_accounting import *", names)
print("GaussianDpEvent" in names, "NeighboringRelation" in names)
"""
    )
    assert lines == ["True True"]

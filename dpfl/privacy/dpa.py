"""Google's dp-accounting, imported without its package `__init__`: every use of it in dpfl goes
through here.

`import dp_accounting` loads the PLD package and the mechanism calibration as well, and with
them scipy.signal, scipy.optimize and scipy.stats: about 1.2 s of a 1.4 s `dpfl privacy epsilon`,
and of every worker's and CLI run's start, while most runs need only the event classes and the
RDP accountant (issue 19: `dpfl privacy epsilon` under 1.5 s). So the package's module object is
registered without running its `__init__`, and its submodules load as they are imported. The
first top-level name anybody asks of it (`dp_accounting.GaussianDpEvent`,
`from dp_accounting import NeighboringRelation`) runs the real `__init__` (PEP 562), so other code
sees the whole package as usual. Where dp_accounting was imported already, nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

__all__ = ["NeighboringRelation", "RdpAccountant", "dp_event", "pld"]


def _register_package() -> None:
    if "dp_accounting" in sys.modules:
        return
    spec = importlib.util.find_spec("dp_accounting")
    package = importlib.util.module_from_spec(spec)
    lock = threading.RLock()  # re-entered only by the __init__'s own lookups, in its thread
    state = {"started": False}

    def complete() -> None:
        # Other threads wait here until the __init__ has run; a failed one can be retried.
        with lock:
            if state["started"]:
                return
            state["started"] = True
            try:
                spec.loader.exec_module(package)
            except BaseException:
                state["started"] = False
                raise
            del package.__getattr__, package.__dir__

    def load(name: str) -> object:
        # Called for a name the package does not hold (yet). `from dp_accounting import dp_event`
        # asks here too, before importing the submodule, so a submodule loads alone.
        if name == "__all__":  # `from dp_accounting import *`: the real package has none
            complete()
            raise AttributeError(name)
        if name.startswith("__"):  # probes such as __wrapped__ need not load anything
            raise AttributeError(name)
        if importlib.util.find_spec(f"dp_accounting.{name}") is not None:
            return importlib.import_module(f"dp_accounting.{name}")
        complete()
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'dp_accounting' has no attribute {name!r}") from None

    def names() -> list[str]:
        complete()
        return sorted(package.__dict__)

    package.__getattr__, package.__dir__ = load, names
    sys.modules["dp_accounting"] = package


_register_package()

from dp_accounting import dp_event  # noqa: E402  (after the package is registered)
from dp_accounting.privacy_accountant import NeighboringRelation  # noqa: E402
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant  # noqa: E402


def pld() -> ModuleType:
    """Returns `dp_accounting.pld`, imported on first use (it loads scipy.signal, ~0.6 s)."""
    return importlib.import_module("dp_accounting.pld")

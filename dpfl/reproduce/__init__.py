"""`dpfl reproduce`: a paper's experiments as sweeps, run here or on a server, with an offline report.

Modules: ``manifest`` (the paper configs and their `reproduce:` block), ``local`` (runs in this
process), ``server`` (submits to a running DP-FL Explorer and reads the results back),
``summary`` (rows per cell, claim verdicts, privacy corrections) and ``report`` (summary.csv and
the self-contained report.html).
"""

from dpfl.reproduce.manifest import (
    PAPERS,
    ConfigError,
    Setting,
    Sweep,
    chosen_settings,
    default_config_dir,
    load_paper,
    quick_settings,
)
from dpfl.reproduce.summary import CANNOT, DOES_NOT_HOLD, HOLDS, Outcome, Verdict

__all__ = [
    "CANNOT",
    "DOES_NOT_HOLD",
    "HOLDS",
    "PAPERS",
    "ConfigError",
    "Outcome",
    "Setting",
    "Sweep",
    "Verdict",
    "chosen_settings",
    "default_config_dir",
    "load_paper",
    "quick_settings",
]

"""Test-wide set-up: absl (inside dp_accounting) logs a warning per excluded RDP order; silence it."""

import logging

logging.getLogger("absl").setLevel(logging.ERROR)

"""Test-wide set-up: absl (inside dp_accounting) logs a warning per excluded RDP order; silence it.
Under pytest-xdist (`make test` runs three processes) the browser tests stay in one process, so
they share one `dpfl up` and one Chromium instead of starting one per process."""

import logging
from pathlib import Path

import pytest

logging.getLogger("absl").setLevel(logging.ERROR)

BROWSER = Path(__file__).parent / "browser"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("browser"))

"""Worker logging: dp-accounting's "failed to converge … Excluding this order" warning once per
run. RDP accounting at small σ and large q gives up on some orders for every event it composes,
and logged each time (14 lines for a 2-round run, thousands for a long one) it buried the log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["OncePerRun", "install", "running"]

_current: str | None = None  # the run (or audit) this process works on: one at a time per process


@contextlib.contextmanager
def running(key: str) -> Iterator[None]:
    """Marks the log records of the body as the run `key`'s."""
    global _current
    previous, _current = _current, key
    try:
        yield
    finally:
        _current = previous


class OncePerRun(logging.Filter):
    """Passes the first "failed to converge" warning of each run and drops the others."""

    MARK = "failed to converge"

    def __init__(self) -> None:
        super().__init__()
        self.logged: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if self.MARK not in str(record.msg):
            return True
        if _current is not None and self.logged == _current:
            return False
        self.logged = _current
        where = "" if _current is None else f"{_current}: "
        record.msg = f"{where}{record.msg} (logged once per run: its other orders and rounds are not)"
        return True


def install() -> None:
    """Adds the filter to dp-accounting's logger (absl's), once."""
    logger = logging.getLogger("absl")
    if not any(isinstance(f, OncePerRun) for f in logger.filters):
        logger.addFilter(OncePerRun())

"""Schema upgrades through Alembic, and the check the app makes before it serves."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

__all__ = ["current_revision", "downgrade", "head_revision", "upgrade"]

_ROOT = Path(__file__).resolve().parents[1]


def _config(url: str) -> Config:
    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


# Postgres advisory lock key of migrations: any fixed 64-bit number, the same in every process
_LOCK_KEY = 0x6470_666C_6D69_6772  # "dpflmigr"


@contextlib.contextmanager
def _serialised(url: str) -> Iterator[None]:
    """Holds a lock that every migration of the database at `url` takes: two processes started
    together on a fresh home (two `dpfl up`) would otherwise both create the tables, and the
    second die half way. Postgres: an advisory lock on its own connection; a SQLite file: a lock
    on a file beside it; an in-memory database: none (no other process sees it)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _LOCK_KEY})
        finally:
            engine.dispose()
    elif parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        with open(f"{parsed.database}.migrate.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            yield
    else:
        yield


def upgrade(url: str, revision: str = "head") -> None:
    """Upgrades the database at `url` to `revision`, one process at a time."""
    with _serialised(url):
        command.upgrade(_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Downgrades the database at `url` to `revision`, one process at a time."""
    with _serialised(url):
        command.downgrade(_config(url), revision)


def head_revision() -> str:
    """Returns the newest revision of the migrations folder."""
    return ScriptDirectory.from_config(_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """Returns the database's revision (None: never migrated)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()

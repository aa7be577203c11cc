"""Schema upgrades through Alembic, and the check the app makes before it serves."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

__all__ = ["current_revision", "downgrade", "head_revision", "upgrade"]

_ROOT = Path(__file__).resolve().parents[1]


def _config(url: str) -> Config:
    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Upgrades the database at `url` to `revision`."""
    command.upgrade(_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Downgrades the database at `url` to `revision`."""
    command.downgrade(_config(url), revision)


def head_revision() -> str:
    """Returns the newest revision of the migrations folder."""
    return ScriptDirectory.from_config(_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """Returns the database's revision (None: never migrated)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()

"""Alembic environment: the URL comes from Settings (or the caller's config), SQLite in batch mode."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from backend.db import Base
from backend.models import Budget  # noqa: F401  (registers every table on Base.metadata)
from backend.settings import get_settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=url.startswith("sqlite")
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")  # given by backend.migrate, or open our own
    if connection is not None:
        _run(connection)
        return
    with create_engine(url).connect() as own:
        _run(own)


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Database engine, sessions and the declarative base shared by the API and the workers.

One MetaData with a naming convention, so constraint names are the same on SQLite and
Postgres and migrations can refer to them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import DateTime, MetaData, create_engine, event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

__all__ = ["Base", "Database", "UtcDateTime", "is_locked", "utcnow"]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator):
    """A timestamp stored as UTC and always read back as an aware UTC datetime.

    SQLite keeps no time zone (its datetimes come back naive) and Postgres answers in the
    session's time zone; the API sends what this returns, so every timestamp has `+00:00`.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return None if value is None else _as_utc(value)

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return None if value is None else _as_utc(value)


def _as_utc(value: dt.datetime) -> dt.datetime:
    """Returns `value` as aware UTC (a naive value is UTC: the service writes only UTC)."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def utcnow() -> dt.datetime:
    """Returns the current time, UTC, timezone-aware."""
    return dt.datetime.now(dt.UTC)


def _sqlite_pragmas(busy_timeout_s: float):
    def on_connect(dbapi_connection, _record) -> None:
        # WAL lets the API read while a worker writes; foreign keys are off by default in SQLite;
        # the busy timeout makes concurrent writers wait instead of failing.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.close()

    return on_connect


def is_locked(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's "database is locked": another writer held the lock past the busy timeout."""
    return isinstance(exc, OperationalError) and "locked" in str(exc.orig)


class Database:
    """An engine and its session factory for one URL."""

    def __init__(self, url: str, *, sqlite_busy_timeout_s: float = 30.0):
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        # More connections than the 40 threads FastAPI runs sync endpoints on, SQLite's included
        # (5 + 10 by default: 50 clients got "QueuePool limit reached"): a request holds its
        # connection until after its response is serialised on another thread, so a smaller
        # pool can leave every thread waiting for a connection that a waiting thread holds.
        pool: dict[str, Any] = {"pool_size": 20, "max_overflow": 40}
        kwargs = (
            pool | {"connect_args": {"check_same_thread": False, "timeout": sqlite_busy_timeout_s}}
            if self.is_sqlite
            else pool | {"pool_pre_ping": True}
        )
        self.engine: Engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas(sqlite_busy_timeout_s))
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Yields a session that commits on success and rolls back on error (the boundary)."""
        with self.sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

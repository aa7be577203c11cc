"""RunWatcher against a real database: snapshot, one event per change, look-back, resumption."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from backend.db import Database, utcnow
from backend.events.service import LOOKBACK_S, RunWatcher
from backend.models import Run, RunStatus

pytestmark = pytest.mark.service


@pytest.fixture
def database(settings) -> Iterator[Database]:
    db = Database(settings.database_url)
    yield db
    db.engine.dispose()


def add_run(database: Database, status: RunStatus = RunStatus.queued, **values) -> str:
    with database.session() as session:
        run = Run(status=status, algorithm="fedavg", dataset="digits", spec={}, rounds=5, **values)
        session.add(run)
        session.flush()
        return run.id


def change(database: Database, run_id: str, **values) -> None:
    with database.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(**values))


def poll(database: Database, watcher: RunWatcher) -> list[tuple[str, dict]]:
    with database.session() as session:
        return watcher.poll(session)


def test_unfiltered_snapshot_is_the_active_runs(database):
    queued, running = add_run(database), add_run(database, RunStatus.running)
    add_run(database, RunStatus.succeeded)
    assert [data["id"] for _, data in poll(database, RunWatcher())] == [queued, running]


def test_a_heartbeat_sends_nothing_and_each_change_sends_once(database):
    run_id = add_run(database, RunStatus.running)
    watcher = RunWatcher(run_id=run_id)
    assert [data["progress"] for _, data in poll(database, watcher)] == [0.0]
    change(database, run_id, heartbeat_at=utcnow())
    assert poll(database, watcher) == []
    change(database, run_id, progress=0.4, current_round=2)
    [(event_id, data)] = poll(database, watcher)
    assert (data["progress"], data["current_round"]) == (0.4, 2)
    with database.session() as session:
        stored = session.get(Run, run_id).updated_at
    assert dt.datetime.fromisoformat(event_id) == stored.replace(tzinfo=stored.tzinfo or dt.UTC)
    assert poll(database, watcher) == []


def test_a_commit_that_lands_behind_the_cursor_is_still_sent(database):
    first = add_run(database)
    watcher = RunWatcher()
    assert len(poll(database, watcher)) == 1
    change(database, first, progress=0.2)
    [(event_id, _)] = poll(database, watcher)
    # A run written before that change but committed after it: its time is behind the cursor.
    behind = dt.datetime.fromisoformat(event_id) - dt.timedelta(seconds=LOOKBACK_S / 2)
    late = add_run(database, updated_at=behind)
    assert [(data["id"], data["status"]) for _, data in poll(database, watcher)] == [(late, "queued")]
    assert poll(database, watcher) == []


def test_since_resumes_strictly_after_it(database):
    run_id = add_run(database)
    with database.session() as session:
        seen = session.get(Run, run_id).updated_at
    watcher = RunWatcher(since=seen.replace(tzinfo=seen.tzinfo or dt.UTC))
    assert poll(database, watcher) == []
    change(database, run_id, status=RunStatus.cancelled)
    assert [data["status"] for _, data in poll(database, watcher)] == ["cancelled"]

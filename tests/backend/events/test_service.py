"""RunWatcher against a real database: snapshot, one event per change, look-back, resumption."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from backend.db import Database, utcnow
from backend.events.service import LOOKBACK_S, RunWatcher, take_snapshot
from backend.events.stream import SharedSnapshots
from backend.models import RoundMetric, Run, RunStatus

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


def test_streams_share_one_snapshot_and_go_on_with_the_changes_after_it(database):
    queued = add_run(database)
    long_ago = utcnow() - dt.timedelta(seconds=3 * LOOKBACK_S)  # finished out of the look-back
    add_run(database, RunStatus.succeeded, updated_at=long_ago)
    snapshots = SharedSnapshots(database, ttl_s=60)

    async def two_streams():
        return await asyncio.gather(snapshots.get(None), snapshots.get(None))

    (first, text), (second, same_text) = asyncio.run(two_streams())
    assert second is first and same_text == text  # one read, one serialisation
    assert text.startswith(f"id: {first.cursor.isoformat()}\nevent: snapshot\ndata: ")
    assert [row[0] for row in first.data()["runs"]] == [queued]

    new = add_run(database)  # after the snapshot: a stream that starts from it gets it as a change
    change(database, queued, progress=0.2, current_round=1)
    again, _ = asyncio.run(snapshots.get(None))
    assert again is first  # still shared within its lifetime
    watcher = RunWatcher()
    watcher.start_from(again)
    assert sorted((d["id"], d["progress"]) for _, d in poll(database, watcher)) == sorted(
        [(new, 0.0), (queued, 0.2)]
    )
    assert poll(database, watcher) == []


def test_a_round_written_sends_its_balanced_accuracy_as_the_runs_list_shows_it(database):
    run_id = add_run(database, RunStatus.running)
    watcher = RunWatcher()
    [(_, data)] = poll(database, watcher)
    assert (data["final_accuracy"], data["final_balanced_accuracy"]) == (None, None)
    for round_, accuracy, balanced in ((2, 0.9983, 0.5), (4, 0.9991, 0.75)):
        # as the worker records a round: its metrics and the run's progress, in one transaction
        with database.session() as session:
            session.add(
                RoundMetric(run_id=run_id, round=round_, accuracy=accuracy, balanced_accuracy=balanced)
            )
            session.flush()
            session.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(current_round=round_, progress=round_ / 5, final_accuracy=accuracy)
            )
        [(_, data)] = poll(database, watcher)
        assert (data["current_round"], data["final_accuracy"], data["final_balanced_accuracy"]) == (
            round_,
            accuracy,
            balanced,
        )
    # a stream that starts now has it in its snapshot's columns
    snapshot = take_snapshot_data(database)
    assert snapshot[run_id]["final_balanced_accuracy"] == 0.75
    with database.session() as session:
        assert session.get(Run, run_id).final_balanced_accuracy == 0.75  # what GET /api/runs serves


def take_snapshot_data(database: Database) -> dict[str, dict]:
    with database.session() as session:
        data = take_snapshot(session).data()
    return {row[0]: dict(zip(data["columns"], row, strict=True)) for row in data["runs"]}

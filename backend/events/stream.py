"""The Server-Sent Events stream: a compact `snapshot` event, then a `run` event per change.

A stream without `since` (and not for one run) starts with one `snapshot` event: the runs
still queued or running (or the sweep's runs), the column names once and one list of values
per run. Streams that start within SNAPSHOT_TTL_S of each other share one snapshot, read and
serialised once (`SharedSnapshots`), so 100 clients opening the runs page cost one query,
not 100 of every active run. Then each change is one `run` event, its id the run's
`updated_at`, so a client that reconnects with `Last-Event-ID` resumes after it (the
snapshot's id is the newest `updated_at` it saw). A comment line keeps idle connections open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from backend.db import Database
from backend.events.service import RunWatcher, Snapshot, take_snapshot
from backend.runs.pages import PageCache

__all__ = [
    "KEEP_ALIVE_S",
    "POLL_S",
    "SNAPSHOT_TTL_S",
    "SharedSnapshots",
    "format_event",
    "run_events",
]

POLL_S = 0.5
KEEP_ALIVE_S = 15.0
SNAPSHOT_TTL_S = 1.0  # well inside service.LOOKBACK_S, so the changes after it are still read


def format_event(event_id: str, data: dict[str, Any], kind: str = "run") -> str:
    """Returns one event in the text/event-stream format."""
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data, allow_nan=False)}\n\n"


@dataclass(frozen=True)
class _Shared:
    snapshot: Snapshot
    text: str  # the `snapshot` event, serialised once


class SharedSnapshots:
    """Snapshots by filter, each read once and shared for SNAPSHOT_TTL_S seconds."""

    def __init__(self, database: Database, ttl_s: float = SNAPSHOT_TTL_S):
        self.database = database
        self._cache = PageCache(ttl_s=ttl_s)

    async def get(self, sweep_id: str | None) -> tuple[Snapshot, str]:
        """Returns the snapshot for the filter and its event text (one build however many ask)."""
        key: Hashable = ("sweep", sweep_id)
        shared = await self._cache.get(key, lambda: asyncio.to_thread(self._build, sweep_id))
        return shared.snapshot, shared.text

    def _build(self, sweep_id: str | None) -> _Shared:
        with self.database.session() as session:
            snapshot = take_snapshot(session, sweep_id=sweep_id)
        return _Shared(snapshot, format_event(snapshot.cursor.isoformat(), snapshot.data(), "snapshot"))


def _poll(database: Database, watcher: RunWatcher) -> list[tuple[str, dict[str, Any]]]:
    with database.session() as session:
        return watcher.poll(session)


async def run_events(
    request: Request,
    database: Database,
    watcher: RunWatcher,
    *,
    timeout_s: float | None,
    snapshots: SharedSnapshots | None = None,
) -> AsyncIterator[str]:
    """Yields the stream until the client disconnects or `timeout_s` seconds have passed.

    With `snapshots`, the stream starts with the shared snapshot for the watcher's sweep (or
    the active runs), and the watcher goes on from it.
    """
    start = last_write = time.monotonic()
    if snapshots is not None:
        snapshot, text = await snapshots.get(watcher.sweep_id)
        watcher.start_from(snapshot)
        yield text
    while not await request.is_disconnected():
        changes = await asyncio.to_thread(_poll, database, watcher)  # blocking database I/O
        for event_id, data in changes:
            yield format_event(event_id, data)
        now = time.monotonic()
        if changes:
            last_write = now
        elif now - last_write >= KEEP_ALIVE_S:
            yield ": keep-alive\n\n"
            last_write = now
        if timeout_s is not None and now - start >= timeout_s:
            return
        await asyncio.sleep(POLL_S)

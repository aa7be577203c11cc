"""The Server-Sent Events stream: polls a RunWatcher and writes its changes as `run` events.

Each change is one event, its id the run's `updated_at`, so a client that reconnects with
`Last-Event-ID` resumes after it. A comment line keeps idle connections (and proxies) open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request

from backend.db import Database
from backend.events.service import RunWatcher

__all__ = ["KEEP_ALIVE_S", "POLL_S", "format_event", "run_events"]

POLL_S = 0.5
KEEP_ALIVE_S = 15.0


def format_event(event_id: str, data: dict[str, Any]) -> str:
    """Returns one `run` event in the text/event-stream format."""
    return f"id: {event_id}\nevent: run\ndata: {json.dumps(data, allow_nan=False)}\n\n"


def _poll(database: Database, watcher: RunWatcher) -> list[tuple[str, dict[str, Any]]]:
    with database.session() as session:
        return watcher.poll(session)


async def run_events(
    request: Request, database: Database, watcher: RunWatcher, *, timeout_s: float | None
) -> AsyncIterator[str]:
    """Yields the stream until the client disconnects or `timeout_s` seconds have passed."""
    start = last_write = time.monotonic()
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

"""Which runs changed, for the event stream: polled from the database, so it works across processes.

A watcher keeps a cursor (the newest `updated_at` seen) and what it last sent for each run,
and each poll returns the runs whose state changed since, once per change. Rows are read with
a look-back of LOOKBACK_S behind the cursor: `updated_at` is set when a row is written, not
when its transaction commits, so a slow commit can land behind a faster one; the look-back
still sees it, and what was sent already is not sent twice. A heartbeat also touches
`updated_at` but changes nothing a client shows, so it sends nothing.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, load_only

from backend.db import utcnow
from backend.errors import NotFound, ParameterError
from backend.models import LIVE, Run, RunStatus, Sweep

__all__ = [
    "LOOKBACK_S",
    "PAGE",
    "SNAPSHOT_COLUMNS",
    "RunWatcher",
    "Snapshot",
    "open_watcher",
    "parse_since",
    "run_event",
    "take_snapshot",
]

LOOKBACK_S = 5.0
PAGE = 500
_ACTIVE = LIVE
_EVENT_COLUMNS = (
    Run.updated_at,
    Run.status,
    Run.progress,
    Run.current_round,
    Run.rounds,
    Run.epsilon,
    Run.final_accuracy,
    Run.final_balanced_accuracy,
    Run.sweep_id,
    Run.error,
)
# the keys of `run_event`, in the order a snapshot's rows give them
SNAPSHOT_COLUMNS = (
    "id",
    "status",
    "progress",
    "current_round",
    "rounds",
    "epsilon",
    "final_accuracy",
    "final_balanced_accuracy",
    "sweep_id",
    "error",
)


def run_event(run: Run) -> dict[str, Any]:
    """Returns the event data of a run: its status and progress (non-finite numbers as null)."""
    return {
        "id": run.id,
        "status": run.status,
        "progress": run.progress,
        "current_round": run.current_round,
        "rounds": run.rounds,
        "epsilon": _finite(run.epsilon),
        "final_accuracy": _finite(run.final_accuracy),
        # its last evaluated round's, as the Runs list shows it (GET /api/runs)
        "final_balanced_accuracy": _finite(run.final_balanced_accuracy),
        "sweep_id": run.sweep_id,
        "error": run.error,
    }


def parse_since(value: str | None, *, field: str = "since", location: str = "query") -> dt.datetime | None:
    """Returns an ISO 8601 timestamp as an aware UTC datetime (naive means UTC).

    Raises:
        ParameterError: not a timestamp (422 with loc [location, field]).
    """
    if value is None or value == "":
        return None
    try:
        return _utc(dt.datetime.fromisoformat(value.upper()))  # RFC 3339 allows a lower-case t and z
    except ValueError:
        raise ParameterError(
            location,
            field,
            f"must be an ISO 8601 timestamp such as 2025-01-31T12:00:00+00:00; got {value!r}.",
        ) from None


@dataclass(frozen=True)
class Snapshot:
    """The runs a stream starts from, read once and shared by every stream that starts meanwhile.

    Attributes:
        cursor: the newest `updated_at` it has seen; streams go on from there.
        runs: each run's event data, oldest change first.
        sent: what a watcher remembers as sent after it (finished runs out of the look-back
            window are forgotten).
    """

    cursor: dt.datetime
    runs: list[dict[str, Any]]
    sent: dict[str, tuple[dt.datetime, dict[str, Any]]]

    def data(self) -> dict[str, Any]:
        """Returns the compact event data: the column names once, then one list of values per run."""
        return {
            "columns": list(SNAPSHOT_COLUMNS),
            "runs": [[data[c] for c in SNAPSHOT_COLUMNS] for data in self.runs],
        }


def take_snapshot(session: Session, *, sweep_id: str | None = None) -> Snapshot:
    """Returns the runs still queued or running, or with `sweep_id` all of that sweep's runs."""
    watcher = RunWatcher(sweep_id=sweep_id)
    runs = [data for _, data in watcher.poll(session)]
    return Snapshot(cursor=watcher.cursor, runs=runs, sent=watcher.sent)


@dataclass
class RunWatcher:
    """What one stream has sent: each `poll` returns (event id, data) for runs changed since.

    Without `since`, the first poll is a snapshot: the filtered run or sweep's runs, or, with
    no filter, the runs still queued or running. With `since`, it resumes after that time.
    """

    run_id: str | None = None
    sweep_id: str | None = None
    since: dt.datetime | None = None
    cursor: dt.datetime = field(default_factory=utcnow)
    sent: dict[str, tuple[dt.datetime, dict[str, Any]]] = field(default_factory=dict)
    _first: bool = field(default=True, init=False, repr=False)
    # The last poll filled a page: read on from the cursor, without look-back, to catch up.
    _behind: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.since is not None:
            self.cursor = self.since

    def start_from(self, snapshot: Snapshot) -> None:
        """Continues after a snapshot (taken for the same filters) instead of taking one."""
        self.cursor, self.sent, self._first = snapshot.cursor, dict(snapshot.sent), False

    def poll(self, session: Session) -> list[tuple[str, dict[str, Any]]]:
        """Returns the changes since the last poll, oldest first, and remembers them as sent."""
        if self._first and self.since is None:
            # Start from the newest row's time, not this machine's clock: workers write the times.
            newest = session.scalar(select(func.max(Run.updated_at)))
            self.cursor = self.cursor if newest is None else _utc(newest)
        rows = session.scalars(self._query()).all()
        self._behind = not (self._first and self.since is None) and len(rows) == PAGE
        self._first = False
        out = []
        for run in rows:
            at, data = _utc(run.updated_at), run_event(run)
            last = self.sent.get(run.id)
            if last is None or (at > last[0] and data != last[1]):
                out.append((at.isoformat(), data))
            self.sent[run.id] = (max(at, last[0]) if last else at, data)
            self.cursor = max(self.cursor, at)
        self._forget()
        return out

    def _query(self) -> Select:
        # Only what an event shows: the full rows (spec, diagnostics, timings JSON) made the
        # snapshot of 1,118 active runs take seconds per client (issue 17 item 12).
        query = select(Run).options(load_only(*_EVENT_COLUMNS)).order_by(Run.updated_at, Run.id)
        if self.run_id is not None:
            query = query.where(Run.id == self.run_id)
        if self.sweep_id is not None:
            query = query.where(Run.sweep_id == self.sweep_id)
        if self._first and self.since is None:  # the snapshot
            filtered = self.run_id is not None or self.sweep_id is not None
            return query if filtered else query.where(Run.status.in_(_ACTIVE))
        if self._first or self._behind:
            low, strict = self.cursor, self._first
        else:
            low, strict = self.cursor - dt.timedelta(seconds=LOOKBACK_S), True
        if self.since is not None and low <= self.since:  # the client has everything up to `since`
            low, strict = self.since, True
        return query.where(Run.updated_at > low if strict else Run.updated_at >= low).limit(PAGE)

    def _forget(self) -> None:
        # A finished run outside the look-back window will not be read again unless it changes.
        horizon = self.cursor - dt.timedelta(seconds=LOOKBACK_S)
        for run_id, (at, data) in list(self.sent.items()):
            if at < horizon and RunStatus(data["status"]).finished:
                del self.sent[run_id]


def open_watcher(
    session: Session, *, run_id: str | None, sweep_id: str | None, since: dt.datetime | None
) -> RunWatcher:
    """Returns a watcher for the filters; raises NotFound (404) for a run or sweep that does not exist."""
    if run_id is not None and session.get(Run, run_id) is None:
        raise NotFound(f"run {run_id!r} does not exist")
    if sweep_id is not None and session.get(Sweep, sweep_id) is None:
        raise NotFound(f"sweep {sweep_id!r} does not exist")
    return RunWatcher(run_id=run_id, sweep_id=sweep_id, since=since)


def _utc(value: dt.datetime) -> dt.datetime:
    # SQLite returns naive datetimes; every timestamp here is written in UTC.
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None

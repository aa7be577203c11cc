"""Log a run from your own code: open it, log each round's metrics and releases, finish it.

Shaped like `mlflow.start_run`, for a DP-FL run executed outside DP-FL Explorer (a hand-rolled
loop, Opacus, Flower)::

    with dpfl.track.start_run(algorithm="my dp-fedavg", dataset="adult", notion="record",
                              delta=1e-5, server="http://127.0.0.1:8000") as run:
        for r in range(1, rounds + 1):
            ...  # train
            run.log_round(r, accuracy=acc, events={"client_0": dp_accounting_event})

With a `server`, each call is one request to its ingestion API (`backend/runs/ingest.py`); a
round sent twice (a retry after a lost answer) is stored once. Without one, the run is written
to `path` after every call (replaced whole, so a crash leaves the rounds logged so far), and
`upload(path, server)` imports it later in one request (POST /api/runs/import).

Events may be our ledger's events (`dpfl.privacy.events`), their JSON, or dp-accounting
`DpEvent`s (translated exactly by `dpfl.privacy.translation`, or refused). Every round is checked
here by the same rules the server applies (`dpfl.external`), so a bad value fails in the training
loop, naming the field, before anything is sent or written. The server recomputes ε from the
events; `reported_epsilon` (what your own accountant printed) is only shown beside it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from dpfl.errors import DpflError, SpecError
from dpfl.external import parse_end, parse_external, parse_round
from dpfl.privacy.dpa import dp_event
from dpfl.privacy.events import Event, to_json
from dpfl.privacy.translation import from_dp_accounting

__all__ = ["TrackedRun", "TrackingError", "event_json", "start_run", "upload"]

EventLike = Event | dp_event.DpEvent | Mapping[str, Any]


class TrackingError(DpflError):
    """The server refused or could not take a request; the message carries its status and detail."""


def event_json(event: EventLike, *, field: str = "event") -> dict[str, Any] | None:
    """Returns the ledger JSON of an event given as ours, as JSON, or as a dp-accounting `DpEvent`
    (None for a `NoOpDpEvent`: nothing released)."""
    if isinstance(event, Event):
        return to_json(event)
    if isinstance(event, dp_event.DpEvent):
        ours = from_dp_accounting(event, field=field)
        return None if ours is None else to_json(ours)
    if isinstance(event, Mapping):
        return dict(event)
    raise SpecError(
        field, f"must be a dpfl event, its JSON or a dp_accounting DpEvent; got {type(event).__name__}."
    )


class TrackedRun:
    """One external run being logged: `log_round` for each round, then `finish` (or leave the
    `with` block: succeeded, or failed with the exception's message)."""

    def __init__(
        self,
        description: dict[str, Any],
        *,
        server: str | None,
        path: Path | None,
        token: str | None,
        timeout_s: float,
    ):
        self.description = description
        self.rounds: list[dict[str, Any]] = []
        self.end: dict[str, Any] | None = None
        self.path = path
        self.id: str | None = None
        self._client = None
        if server is not None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            self._client = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout_s)
            # a retried create finds the run the first made (the server's Idempotency-Key)
            key = {"Idempotency-Key": uuid.uuid4().hex}
            self.id = self._send("POST", "/api/runs", description, headers=key)["id"]
        else:
            self._write()

    def log_round(
        self,
        round: int,
        *,
        accuracy: float | None = None,
        loss: float | None = None,
        metrics: Mapping[str, float] | None = None,
        events: Mapping[str, EventLike | Sequence[EventLike]] | None = None,
        reported_epsilon: float | None = None,
    ) -> dict[str, Any]:
        """Logs one round (numbered from 1, increasing); returns what the server answered (the
        run's ε after it), or the round as written to the file.

        Args:
            events: party (a client, a silo, `server`) ↦ the event or events it released this round.
            reported_epsilon: your own accountant's ε so far, shown beside the server's.

        Raises:
            SpecError: a value is invalid, naming the field (nothing is sent or written).
            TrackingError: the server refused the round.
        """
        body: dict[str, Any] = {"round": round, "events": {}}
        for party, given in (events or {}).items():
            listed = [given] if isinstance(given, Event | dp_event.DpEvent | Mapping) else list(given)
            out = [event_json(e, field=f"events.{party}.{i}") for i, e in enumerate(listed)]
            body["events"][party] = [e for e in out if e is not None]
        optional = {"accuracy": accuracy, "loss": loss, "reported_epsilon": reported_epsilon}
        body |= {k: v for k, v in optional.items() if v is not None}
        if metrics:
            body["metrics"] = dict(metrics)
        parse_round(body)  # the server's own checks, here first
        if self._client is not None:
            return self._send("POST", f"/api/runs/{self.id}/rounds", body)
        if self.rounds and round <= self.rounds[-1]["round"]:
            raise SpecError(
                "round",
                f"must be greater than the last round logged ({self.rounds[-1]['round']}); got {round}.",
            )
        self.rounds.append(body)
        self._write()
        return body

    def finish(
        self, status: str = "succeeded", *, reported_epsilon: float | None = None, error: str | None = None
    ) -> dict[str, Any]:
        """Ends the run (`succeeded`, `failed` or `cancelled`); returns the run as the server shows
        it, or the end as written to the file."""
        body = {
            k: v
            for k, v in {"status": status, "reported_epsilon": reported_epsilon, "error": error}.items()
            if v is not None
        }
        parse_end(body)
        self.end = body
        if self._client is None:
            self._write()
            return body
        try:
            return self._send("POST", f"/api/runs/{self.id}/finish", body)
        finally:
            self._client.close()

    def __enter__(self) -> TrackedRun:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.end is not None:
            return
        if exc is None:
            self.finish()
        else:
            self.finish(
                "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed",
                error=f"{kind.__name__}: {exc}"[:2000],
            )

    def _send(
        self, method: str, url: str, body: dict[str, Any], headers: dict | None = None
    ) -> dict[str, Any]:
        try:
            res = self._client.request(method, url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise TrackingError(
                f"could not reach the DP-FL Explorer server at {self._client.base_url} ({exc})"
            ) from exc
        return _answer(res)

    def _write(self) -> None:
        """Writes the whole run to `path`, replacing it in one step (a crash leaves the last whole file)."""
        data = {"run": self.description, "rounds": self.rounds, "end": self.end}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(data, allow_nan=False))
        temporary.replace(self.path)


def _answer(res: httpx.Response) -> dict[str, Any]:
    if res.is_success:
        return res.json()
    try:
        detail = res.json().get("detail", res.text)
    except ValueError:
        detail = res.text
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):  # a 422: the field and why
        first = detail[0]
        detail = f"`{'.'.join(map(str, first.get('loc', [])[1:]))}` {first.get('msg')}"
    raise TrackingError(f"the server answered {res.status_code}: {detail}")


def start_run(
    *,
    algorithm: str,
    dataset: str,
    notion: str = "record",
    delta: float | None = None,
    params: Mapping[str, Any] | None = None,
    accountant: str = "rdp",
    rounds: int | None = None,
    reported_by: str | None = None,
    reported_epsilon: float | None = None,
    name: str = "",
    server: str | None = None,
    token: str | None = None,
    path: str | os.PathLike | None = None,
    timeout_s: float = 30.0,
) -> TrackedRun:
    """Returns a run being logged to `server` (its URL), or, without one, to the file `path`
    (default `dpfl-run-<id>.json` here) for `upload` later.

    Args:
        algorithm: a label for what ran (free text: it is no registered algorithm).
        dataset: a label for what it ran on.
        notion: the unit one release protects: record, user, agent, instance, gdp, or none.
        delta: δ of the ε, in (0, 1); required unless notion is none.
        accountant: the server's accountant that recomputes ε (rdp or pld).
        token: a bearer token, for a server with DPFL_API_TOKENS set.

    Raises:
        SpecError: the description is invalid, naming the field.
        TrackingError: the server refused it or could not be reached.
    """
    description: dict[str, Any] = {
        "source": "external",
        "algorithm": algorithm,
        "dataset": dataset,
        "notion": notion,
        "accountant": accountant,
        "params": dict(params or {}),
        "name": name,
    }
    optional = {
        "delta": delta,
        "rounds": rounds,
        "reported_by": reported_by,
        "reported_epsilon": reported_epsilon,
    }
    description |= {k: v for k, v in optional.items() if v is not None}
    try:
        parse_external(json.loads(json.dumps(description, allow_nan=False)))  # as the server reads it
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SpecError):
            raise
        raise SpecError("params", f"must be JSON: numbers, strings, lists and mappings ({exc}).") from None
    where = None if server is not None else Path(path or f"dpfl-run-{uuid.uuid4().hex[:8]}.json")
    return TrackedRun(description, server=server, path=where, token=token, timeout_s=timeout_s)


def upload(
    path: str | os.PathLike, server: str, *, token: str | None = None, timeout_s: float = 120.0
) -> dict[str, Any]:
    """Imports a run that `start_run` wrote without a server (POST /api/runs/import, all of it or
    nothing); returns the run as the server shows it."""
    data = json.loads(Path(path).read_text())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        res = httpx.post(
            f"{server.rstrip('/')}/api/runs/import", json=data, headers=headers, timeout=timeout_s
        )
    except httpx.HTTPError as exc:
        raise TrackingError(f"could not reach the DP-FL Explorer server at {server} ({exc})") from exc
    return _answer(res)

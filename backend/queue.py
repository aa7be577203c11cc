"""The Celery app both sides share: the API sends `dpfl.execute_run` and `dpfl.audit_run`, workers run them.

Configured from Settings (Airflow's defaults): JSON only, late acknowledgement, one message
prefetched, a message rejected (re-queued) when its worker process dies, and a visibility
timeout longer than the longest run. Outcomes go on the run row, never to a result backend.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Sequence

from celery import Celery, group
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

from backend.settings import Settings

__all__ = [
    "AUDIT_RUN",
    "EXECUTE_BATCH",
    "EXECUTE_RUN",
    "AtomicFilesystemTransport",
    "enqueue_audit",
    "enqueue_run",
    "enqueue_runs",
    "make_celery",
    "pending_runs",
]

log = logging.getLogger(__name__)

EXECUTE_RUN = "dpfl.execute_run"
EXECUTE_BATCH = "dpfl.execute_batch"  # the queued runs of one batch (`Run.batch_id`), trained together
AUDIT_RUN = "dpfl.audit_run"
# A run's (or batch's) message carries its id in its task id, so the dispatcher can tell which
# queued runs still have a message in the broker (`pending_runs`).
_TASK_ID = "{kind}:{id}:{token}"


class _AtomicChannel(filesystem.Channel):
    """Kombu's filesystem channel, with each message written whole before a worker can see it.

    The stock channel creates `<name>.msg` and then writes into it, while a worker polling the
    folder moves away and reads every `.msg` it finds: under load it took an empty message, failed
    to parse it and stopped consuming for good (its runs then sat queued). Here the message is
    written under a name no queue reads (no dot) and renamed into place, atomically.
    """

    def _put(self, queue, payload, **kwargs):
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        partial = os.path.join(self.data_folder_out, f"partial-{uuid.uuid4().hex}")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class AtomicFilesystemTransport(filesystem.Transport):
    """The embedded broker's transport: the filesystem one, messages renamed into place whole."""

    Channel = _AtomicChannel


def make_celery(settings: Settings) -> Celery:
    """Returns a Celery app for the settings' broker (Redis, or the embedded filesystem transport)."""
    app = Celery("dpfl", broker=settings.broker_url, set_as_current=False)
    transport: dict = {"visibility_timeout": settings.run_time_limit_s + 3600}
    if settings.embedded:
        app.conf.broker_transport = f"{__name__}:AtomicFilesystemTransport"
        folder = settings.broker_folder
        for sub in ("queue", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        transport |= {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "store_processed": False,
            # the control folder defaults to ./control in the working directory; keep it in DPFL_HOME
            "control_folder": str(folder / "control"),
        }
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options=transport,
        broker_connection_retry_on_startup=True,
        task_time_limit=settings.run_time_limit_s,
        worker_hijack_root_logger=False,
        # A broker that is down must fail a send within a second or two, not hold the request:
        # the dispatcher (backend.dispatch) sends the run's message when the broker is back.
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
        broker_connection_timeout=2,
    )
    return app


def _signature(celery: Celery, kind: str, id: str):
    task = {"run": EXECUTE_RUN, "batch": EXECUTE_BATCH, "audit": AUDIT_RUN}[kind]
    return celery.signature(
        task, args=[id], task_id=_TASK_ID.format(kind=kind, id=id, token=uuid.uuid4().hex[:8])
    )


def enqueue_run(celery: Celery, run_id: str) -> None:
    """Queues one run by id (the only argument a task takes)."""
    _signature(celery, "run", run_id).apply_async()


def enqueue_runs(celery: Celery, run_ids: Sequence[str], batch_ids: Sequence[str] = ()) -> None:
    """Queues runs, and batches of runs, by id as one Celery group: the broker connection is
    opened once for all."""
    group(
        [_signature(celery, "run", i) for i in run_ids] + [_signature(celery, "batch", i) for i in batch_ids]
    ).apply_async()


def pending_runs(celery: Celery, settings: Settings) -> set[str] | None:
    """Returns the ids of runs, batches and audits with a message in the broker, waiting or
    delivered but not acknowledged; None when this broker cannot be looked into (then every old message
    counts as lost, and a duplicate is harmless: a worker's claim takes a run once)."""
    if settings.embedded:
        messages = []
        for path in (settings.broker_folder / "queue").glob("*.msg"):
            try:
                messages.append(json.loads(path.read_text()))
            except (OSError, ValueError):  # taken by a worker meanwhile, or still being written
                continue
    elif settings.broker_url.startswith(("redis://", "rediss://")):
        with celery.connection_for_write() as conn:
            client = conn.default_channel.client
            queue = celery.conf.task_default_queue
            # kombu keeps one list per priority step ("celery", "celery\x06\x163", ...) and the
            # delivered, unacknowledged messages in the hash "unacked"
            keys = [queue, *client.scan_iter(match=f"{queue}\x06\x16*")]
            raw = [m for key in keys for m in client.lrange(key, 0, -1)]
            messages = [json.loads(m) for m in raw]
            messages += [json.loads(m)[0] for m in client.hvals("unacked")]
    else:
        return None
    found = set()
    for message in messages:
        task_id = str((message.get("headers") or {}).get("id", ""))
        if task_id.startswith(("run:", "batch:", "audit:")):
            found.add(task_id.split(":")[1])
    return found


def enqueue_audit(celery: Celery, audit_id: str) -> None:
    """Queues one audit by id (the only argument its task takes)."""
    _signature(celery, "audit", audit_id).apply_async()

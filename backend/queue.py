"""The Celery app both sides share: the API sends `dpfl.execute_run` and `dpfl.audit_run`, workers run them.

Configured from Settings (Airflow's defaults): JSON only, late acknowledgement, one message
prefetched, a message rejected (re-queued) when its worker process dies, and a visibility
timeout longer than the longest run. Outcomes go on the run row, never to a result backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery, group

from backend.settings import Settings

__all__ = ["AUDIT_RUN", "EXECUTE_RUN", "enqueue_audit", "enqueue_run", "enqueue_runs", "make_celery"]

EXECUTE_RUN = "dpfl.execute_run"
AUDIT_RUN = "dpfl.audit_run"


def make_celery(settings: Settings) -> Celery:
    """Returns a Celery app for the settings' broker (Redis, or the embedded filesystem transport)."""
    app = Celery("dpfl", broker=settings.broker_url, set_as_current=False)
    transport: dict = {"visibility_timeout": settings.run_time_limit_s + 3600}
    if settings.embedded:
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
    )
    return app


def enqueue_run(celery: Celery, run_id: str) -> None:
    """Queues one run by id (the only argument a task takes)."""
    celery.send_task(EXECUTE_RUN, args=[run_id])


def enqueue_runs(celery: Celery, run_ids: Sequence[str]) -> None:
    """Queues many runs as one Celery group: the broker connection is opened once for all."""
    group(celery.signature(EXECUTE_RUN, args=[run_id]) for run_id in run_ids).apply_async()


def enqueue_audit(celery: Celery, audit_id: str) -> None:
    """Queues one audit by id (the only argument its task takes)."""
    celery.send_task(AUDIT_RUN, args=[audit_id])

"""The Celery app the workers run (`dpfl worker`), built from Settings."""

from __future__ import annotations

from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutdown

from backend.db import Database
from backend.queue import make_celery
from backend.settings import get_settings
from worker import logs
from worker.presence import Presence

app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]
logs.install()

_concurrency = 1  # the pool size of this worker, read by its pool processes after the fork
_presence: Presence | None = None


@worker_init.connect
def _remember_concurrency(sender, **_) -> None:
    global _concurrency
    _concurrency = int(getattr(sender, "concurrency", None) or 1)


@worker_process_init.connect
def _share_cores(**_) -> None:
    """Each pool process runs one run at a time on its share of the cores (see
    `Settings.threads_per_run`); the runs record the threads they had."""
    import torch

    torch.set_num_threads(get_settings().threads_per_run(_concurrency))


@worker_ready.connect
def _start_beating(sender, **_) -> None:
    """The worker beats on its row in `workers` from when it takes tasks (backend.health)."""
    global _presence
    settings = get_settings()
    database = Database(settings.database_url, sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s)
    _presence = Presence(database, sender.hostname)
    _presence.start()


@worker_shutdown.connect
def _stop_beating(**_) -> None:
    if _presence is not None:
        _presence.stop()

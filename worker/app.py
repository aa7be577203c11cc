"""The Celery app the workers run (`dpfl worker`), built from Settings."""

from __future__ import annotations

from celery.signals import worker_init, worker_process_init

from backend.queue import make_celery
from backend.settings import get_settings

app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]

_concurrency = 1  # the pool size of this worker, read by its pool processes after the fork


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

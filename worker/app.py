"""The Celery app the workers run (`dpfl worker`), built from Settings."""

from __future__ import annotations

from backend.queue import make_celery
from backend.settings import get_settings

app = make_celery(get_settings())
app.conf.include = ["worker.tasks"]

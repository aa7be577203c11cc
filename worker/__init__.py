"""The Celery worker: a thin adapter from a queued run to `dpfl.runner.run`; built in issue 4."""

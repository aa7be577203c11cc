"""The event stream's tests reach the app through uvicorn on a port, as a browser does.

Starlette's TestClient in the release Flower's extra holds the stack at (starlette 1.3) hands a
streamed response over only once it has ended: a test could not read the snapshot before making
the change it then waits for. Served, each event arrives as it is sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from backend.main import create_app
from backend.settings import Settings
from tests.server import free_port


@pytest.fixture
def client(settings: Settings) -> Iterator[httpx.Client]:
    """An HTTP client of the app on `settings`, served by uvicorn in a thread of this process."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start the app")
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(timeout=30)

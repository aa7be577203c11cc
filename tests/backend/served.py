"""The app behind a real port in this process, and clients that hit it at one instant."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import uvicorn
from fastapi import FastAPI

__all__ = ["at_once", "serve"]


@contextlib.contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Yields the base URL of `app` served by uvicorn in a thread on a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # bound before the thread starts: no race for the port
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 90  # its start warms the projection processes, when it has them
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def at_once(
    url: str, clients: int, send: Callable[[httpx.Client], list[httpx.Response]], *, timeout: float = 120
) -> list[httpx.Response]:
    """Returns every response of `send(client)` run by `clients` threads, each on its own connection
    (opened by a GET first) and released together by a barrier; fails on any transport error."""
    barrier = threading.Barrier(clients, timeout=60)
    answers: list[httpx.Response | BaseException] = []

    def client() -> None:
        with httpx.Client(base_url=url, timeout=timeout) as http:
            http.get("/api/runs", params={"limit": 1})  # connect first, so the requests leave together
            barrier.wait()
            try:
                answers.extend(send(http))
            except httpx.HTTPError as exc:
                answers.append(exc)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout * 3)
    failed = [a for a in answers if not isinstance(a, httpx.Response)]
    assert not failed, failed[:3]
    assert len(answers) >= clients, f"{clients - len(answers)} client(s) did not finish"
    return answers  # type: ignore[return-value]

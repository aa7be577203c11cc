"""A micro-cache of serialised pages (the runs list, sweep summaries), served before routing.

The runs table is the page everyone keeps open, and a sweep's summary is read by everyone
comparing it. A page is built once (query, validation, JSON: about 10 ms) and then served as
bytes for `ttl_s` seconds straight from the ASGI layer (`RunPages`), so a burst of identical
requests costs one query and almost no Python. Writes made through this API process (any
POST, PUT or DELETE) clear it at once; what workers write (progress, finished runs) shows
within `ttl_s` (the live view follows Server-Sent Events anyway). Concurrent misses of one
page share one build, and an expired page is served once more while it is rebuilt in the
background (stale-while-revalidate), so no reader waits for a rebuild.
Pages are keyed by (path, raw query string) and stored only by the endpoint, after
validation (`key`), so an unknown sweep or a bad parameter is never cached.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Hashable

__all__ = ["PATH", "SUMMARY", "PageCache", "RunPages", "cached", "key"]

PATH = "/api/runs"
SUMMARY = re.compile(r"/api/sweeps/[^/]+/summary")  # GET /api/sweeps/{id}/summary (not .csv)


def cached(path: str) -> bool:
    """Whether GET `path` is answered from the page cache."""
    return path == PATH or SUMMARY.fullmatch(path) is not None


def key(scope) -> tuple[str, bytes]:
    """Returns the cache key of a request: its path and raw query string."""
    return scope["path"], scope["query_string"]


class PageCache:
    """Serialised pages by key, each fresh for `ttl_s` seconds."""

    def __init__(self, ttl_s: float = 1.0, max_entries: int = 256):
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._pages: dict[Hashable, tuple[float, int, bytes]] = {}
        self._building: dict[Hashable, tuple[int, asyncio.Future[bytes]]] = {}  # (generation, build)
        self._builders: dict[Hashable, Callable[[], Awaitable[bytes]]] = {}
        self._generation = 0

    def clear(self) -> None:
        """Forgets every page (after a write)."""
        self._generation += 1
        self._pages.clear()

    def lookup(self, key: Hashable) -> tuple[bytes | None, bool]:
        """Returns (page, expired): the page of the current generation if younger than 10 TTLs."""
        hit = self._pages.get(key)
        if hit is None or hit[1] != self._generation:
            return None, False
        age = time.monotonic() - hit[0]
        return (hit[2], age >= self.ttl_s) if age < 10 * self.ttl_s else (None, False)

    async def refresh(self, key: Hashable) -> None:
        """Rebuilds an expired page in the background (no-op if a build is already running)."""
        build = self._builders.get(key)
        if build is None or key in self._building:
            return
        with contextlib.suppress(Exception):  # a failed rebuild leaves the page to expire
            await self.get(key, build, force=True)

    async def get(
        self, key: Hashable, build: Callable[[], Awaitable[bytes]], *, force: bool = False
    ) -> bytes:
        """Returns the cached page for `key`, or builds it once however many ask at the same time."""
        hit = self._pages.get(key)
        if (
            not force
            and hit is not None
            and hit[1] == self._generation
            and time.monotonic() - hit[0] < self.ttl_s
        ):
            return hit[2]
        pending = self._building.get(key)
        # A build begun before the last write may have read the database before it committed:
        # the writer's next read (a list reloaded after a delete) must not be given its page.
        if pending is not None and pending[0] == self._generation:
            return await asyncio.shield(pending[1])
        generation = self._generation
        self._builders[key] = build
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        entry = self._building[key] = (generation, future)
        try:
            body = await build()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so a build no one else awaited is not logged
            raise
        finally:
            if self._building.get(key) is entry:  # a later build of the key may have replaced it
                del self._building[key]
        future.set_result(body)
        if generation == self._generation:  # a write during the build makes the page stale
            if len(self._pages) >= self.max_entries:
                self._pages.clear()
                self._builders = {key: build}
            self._pages[key] = (time.monotonic(), generation, body)
        return body


class RunPages:
    """ASGI middleware: answers cached GETs (`cached`) from the cache; a write clears it before and after.

    After, because the write has committed by then; before as well, so that a page built
    while the write runs is not kept (the generation check in `PageCache.get`). Plain ASGI,
    not Starlette's BaseHTTPMiddleware, which would also wrap the event stream.
    """

    _READS = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app, cache: PageCache):
        self.app = app
        self.cache = cache
        self._refreshing: set[asyncio.Task] = set()  # holds background rebuilds until they end

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET" and cached(scope["path"]):
            page = key(scope)
            body, expired = self.cache.lookup(page)
            if expired:
                task = asyncio.create_task(self.cache.refresh(page))
                self._refreshing.add(task)
                task.add_done_callback(self._refreshing.discard)
            if body is not None:
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        if scope["method"] in self._READS:
            await self.app(scope, receive, send)
            return
        self.cache.clear()
        try:
            await self.app(scope, receive, send)
        finally:
            self.cache.clear()

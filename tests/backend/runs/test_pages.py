"""The run-list micro-cache: one build per burst, cleared by writes, expired pages rebuilt behind."""

from __future__ import annotations

import asyncio

import pytest

from backend.runs.pages import PageCache, cached, key


def test_concurrent_misses_share_one_build():
    cache, builds = PageCache(ttl_s=10), []

    async def build() -> bytes:
        builds.append(1)
        await asyncio.sleep(0.01)
        return b"page"

    async def burst():
        return await asyncio.gather(*(cache.get(b"limit=50", build) for _ in range(20)))

    assert asyncio.run(burst()) == [b"page"] * 20
    assert len(builds) == 1
    assert cache.lookup(b"limit=50") == (b"page", False)


def test_a_write_clears_pages_and_a_build_it_overlapped_is_not_kept():
    cache = PageCache(ttl_s=10)

    async def slow_build() -> bytes:
        await asyncio.sleep(0.01)
        cache.clear()  # a write commits while the page is being built
        return b"stale"

    assert asyncio.run(cache.get(b"q", slow_build)) == b"stale"  # the reader still gets an answer
    assert cache.lookup(b"q") == (None, False)  # but the page is not kept


def test_a_read_after_a_write_does_not_share_a_build_begun_before_it():
    cache, versions = PageCache(ttl_s=10), iter([b"before the write", b"after the write"])

    async def build() -> bytes:
        version = next(versions)
        await asyncio.sleep(0.05)
        return version

    async def scenario():
        early = asyncio.create_task(cache.get(b"q", build))  # its query may predate the write
        await asyncio.sleep(0.01)
        cache.clear()  # the write commits; then its client reads the list again
        late = await cache.get(b"q", build)
        return await early, late, cache.lookup(b"q")

    assert asyncio.run(scenario()) == (b"before the write", b"after the write", (b"after the write", False))


def test_an_expired_page_is_served_while_it_is_rebuilt():
    cache, versions = PageCache(ttl_s=0.05), iter([b"v1", b"v2"])

    async def build() -> bytes:
        return next(versions)

    async def scenario():
        assert await cache.get(b"q", build) == b"v1"
        await asyncio.sleep(0.06)
        assert cache.lookup(b"q") == (b"v1", True)  # expired: served once more
        await cache.refresh(b"q")
        return cache.lookup(b"q")

    assert asyncio.run(scenario()) == (b"v2", False)


def test_a_failed_build_is_not_cached():
    cache = PageCache()

    async def broken() -> bytes:
        raise ValueError("bad sort")

    with pytest.raises(ValueError, match="bad sort"):
        asyncio.run(cache.get(b"sort=colour", broken))
    assert cache.lookup(b"sort=colour") == (None, False)


def test_the_runs_list_and_sweep_summaries_are_cached_and_nothing_else():
    for path in ("/api/runs", "/api/sweeps/abc123/summary"):
        assert cached(path), path
    others = ("/api/runs.csv", "/api/runs/x", "/api/sweeps/abc/summary.csv", "/api/sweeps/abc", "/api/sweeps")
    for path in others:
        assert not cached(path), path
    assert key({"path": "/api/sweeps/a/summary", "query_string": b""}) != key(
        {"path": "/api/sweeps/b/summary", "query_string": b""}
    )

"""Closed-loop HTTP load: `concurrency` keep-alive connections each send GETs back to back.

The load generator of benchmarks/api.py, run in a process of its own so that its work does not
share the server's interpreter. It speaks HTTP/1.1 directly over asyncio streams (a request is
two writes and a `Content-Length` read), which costs far less CPU per request than a full client
library and so disturbs the server less on the same machine. Prints one JSON line: latency
percentiles in ms, throughput, errors.

Usage: python -m benchmarks.api_load --url http://127.0.0.1:PORT/api/runs?limit=50
           [--concurrency 100] [--requests 2000] [--warmup 200] [--max-seconds 120]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from urllib.parse import urlsplit

__all__ = ["percentile", "run_load"]


def percentile(sorted_values: list[float], p: float) -> float:
    """Returns the nearest-rank `p`-th percentile (0 < p ≤ 100) of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


class _Connection:
    """One keep-alive HTTP/1.1 connection that sends the same GET again and again."""

    def __init__(self, host: str, port: int, target: str):
        self.host, self.port = host, port
        self.request = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self) -> tuple[int, bytes]:
        """Returns (status, body) of one GET, reconnecting when the server closed the connection."""
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(self.request.encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        if "content-length" not in headers:
            raise RuntimeError(f"response without Content-Length: {lines[0]}")
        body = await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def run_load(
    url: str, *, concurrency: int, requests: int, warmup: int, max_seconds: float
) -> dict[str, float | int]:
    """Returns latency percentiles (ms), throughput (requests/s) and counts of a closed-loop load.

    `warmup` requests are sent first and not measured; then `requests` are measured, or as many
    as finish within `max_seconds`.
    """
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    connections = [_Connection(host, port, target) for _ in range(concurrency)]
    latencies: list[float] = []
    errors: list[tuple[bool, float, str]] = []  # (measured, seconds taken, what)
    budget = {"warmup": warmup, "measured": requests}
    deadline = time.monotonic() + max_seconds
    start_measuring: list[float] = []

    async def client(conn: _Connection) -> None:
        while time.monotonic() < deadline:
            if budget["warmup"] > 0:
                budget["warmup"] -= 1
                measured = False
            elif budget["measured"] > 0:
                budget["measured"] -= 1
                measured = True
                if not start_measuring:
                    start_measuring.append(time.perf_counter())
            else:
                return
            t0 = time.perf_counter()
            try:
                status, body = await conn.get()
            except (OSError, asyncio.IncompleteReadError, RuntimeError, ValueError) as exc:
                conn.close()
                errors.append((measured, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"))
                continue
            elapsed = time.perf_counter() - t0
            if measured:  # an error response is a latency too (a 500 may come after a long stall)
                latencies.append(elapsed)
            if status != 200:
                errors.append((measured, elapsed, f"HTTP {status}: {body[:200]!r}"))

    await asyncio.gather(*(client(c) for c in connections))
    end = time.perf_counter()
    for c in connections:
        c.close()
    latencies.sort()
    duration = end - start_measuring[0] if start_measuring else math.nan
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": len(errors),
        "errors_measured": sum(measured for measured, _, _ in errors),
        "error_median_s": statistics.median(t for _, t, _ in errors) if errors else math.nan,
        "first_error": errors[0][2] if errors else "",
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p95_ms": percentile(latencies, 95) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "max_ms": (latencies[-1] if latencies else math.nan) * 1e3,
        "throughput_rps": len(latencies) / duration if latencies else 0.0,
        "duration_s": duration,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--requests", type=int, default=2000, help="measured requests")
    parser.add_argument("--warmup", type=int, default=200, help="requests sent first and not measured")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="stop sending after this long")
    args = parser.parse_args()
    result = asyncio.run(
        run_load(
            args.url,
            concurrency=args.concurrency,
            requests=args.requests,
            warmup=args.warmup,
            max_seconds=args.max_seconds,
        )
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""API benchmark: the runs list and a sweep summary under load, a sweep submission, live events.

One config (CONFIG below). A fresh Postgres database gets 10,000 runs with 10 metric rows each
(bulk-inserted with SQLAlchemy core, then ANALYZEd), and the app is served by a real uvicorn
process on a free loopback port, with Redis as its broker. Then:

(a) `GET /api/runs?limit=50` from a second process (benchmarks/api_load.py): 100 keep-alive
    connections send requests back to back; after a warm-up, 2,000 are measured. One
    connection alone is measured too, as the reference: the time of the request itself,
    without queueing behind the 99 others. Target: p99 < 50 ms under the load.
(b) `POST /api/sweeps` with 200 points (`privacy.epsilon` over 200 values): median of 5 after
    one warm-up. Target < 1 s. Not measured when the endpoint is absent (404/405).
(c) `GET /api/events`: 20 runs are updated (progress, round, `updated_at`) at 10 Hz each for
    5 s by this process, as 20 workers would; the lag of an update is the time from its
    commit until an event shows that run at that round or later. Target: p95 lag < 1 s.
    Not measured when the endpoint is absent.
(d) `GET /api/sweeps/{id}/summary` of a seeded sweep of 600 runs next to `GET /api/runs?limit=50`,
    each from 50 keep-alive connections (as in issue 17, where the summary took p50 0.9 s /
    p99 3.0 s against the list's 0.15 / 1.3–1.8 s). Target: the summary's p50 and p99 within
    2× the list's, and no errors.
(e) Time to first event: 100 clients open `GET /api/events` at once while 1,118 runs are
    queued or running (seeded so); the time from each request until its first event is
    complete. Target: median < 1 s, every client served.

The database is dropped and the server stopped at the end. Exit status 1 when a measured
target is missed. Usage: python benchmarks/api.py [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
import uvicorn
from sqlalchemy import create_engine, text, update

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.models import Run
from benchmarks.api_data import SPEC, fresh_database, seed
from benchmarks.api_load import percentile
from benchmarks.report import print_headline, publish

ROOT = Path(__file__).resolve().parents[1]

CONFIG: dict[str, Any] = {
    "postgres_admin": "postgresql://postgres@127.0.0.1:5432/postgres",
    "redis": "redis://127.0.0.1:6379/15",  # a database index of the benchmark's own, emptied after
    "runs": 10_000,
    "metrics_per_run": 10,
    "list": {"path": "/api/runs?limit=50", "concurrency": 100, "requests": 30_000, "warmup": 200},
    "list_reference": {"concurrency": 1, "requests": 300, "warmup": 50},
    "list_max_seconds": 120.0,
    "list_target_p99_ms": 50.0,
    "sweep": {"points": 200, "repeats": 5, "target_s": 1.0},
    "events": {"runs": 20, "hz": 10.0, "seconds": 5.0, "target_p95_s": 1.0},
    "sweep_runs": 600,  # a seeded sweep for (d)
    "active_runs": 1_118,  # queued or running, for (e): the 10,000 have about 200; more queued are added
    "summary": {"concurrency": 50, "requests": 5_000, "warmup": 200, "target_ratio": 2.0},
    "first_event": {"clients": 100, "target_median_s": 1.0},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(url: str, home: Path) -> Iterator[str]:
    """Yields the base URL of `uvicorn backend.main:app` on a free loopback port (one process)."""
    port = free_port()
    env = os.environ | {
        "DPFL_HOME": str(home),
        "DPFL_DATABASE_URL": url,
        "DPFL_BROKER_URL": CONFIG["redis"],
        "DPFL_DATA_DIR": os.environ.get("DPFL_DATA_DIR", str(ROOT.parent / "shared" / "data")),
        "DPFL_HOST": "127.0.0.1",
        "DPFL_API_TOKENS": "",
        # the seeded "running" runs have no worker: keep the reaper from re-queueing them
        "DPFL_HEARTBEAT_TIMEOUT_S": "86400",
    }
    log = (home / "uvicorn.log").open("w")
    cmd = [sys.executable, "-m", "uvicorn", "backend.main:app", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start:\n{(home / 'uvicorn.log').read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/api/runs?limit=1", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def load(
    base: str, *, concurrency: int, requests: int, warmup: int, path: str = CONFIG["list"]["path"]
) -> dict[str, Any]:
    """Returns the load generator's result for GET `path` (run in a process of its own)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.api_load",
        "--url",
        base + path,
        "--concurrency",
        str(concurrency),
        "--requests",
        str(requests),
        "--warmup",
        str(warmup),
        "--max-seconds",
        str(CONFIG["list_max_seconds"]),
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=CONFIG["list_max_seconds"] + 60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_list(base: str) -> dict[str, dict[str, Any]]:
    """Returns the loaded and the single-connection measurements of the runs list."""
    page = httpx.get(base + CONFIG["list"]["path"], timeout=30).json()
    assert page["total"] >= CONFIG["runs"] and len(page["items"]) == 50, page.get("total")
    ref = CONFIG["list_reference"]
    single = load(base, concurrency=ref["concurrency"], requests=ref["requests"], warmup=ref["warmup"])
    cfg = CONFIG["list"]
    loaded = load(base, concurrency=cfg["concurrency"], requests=cfg["requests"], warmup=cfg["warmup"])
    return {"single": single, "loaded": loaded}


def measure_summary(base: str, sweep_id: str) -> dict[str, dict[str, Any]]:
    """Returns the runs list and the sweep's summary, each under the same load (d)."""
    path = f"/api/sweeps/{sweep_id}/summary"
    summary = httpx.get(base + path, timeout=30).json()
    assert sum(summary["counts"].values()) == CONFIG["sweep_runs"], summary.get("counts")
    assert summary["rows"] and summary["pareto"] and summary["reference"], summary
    cfg = CONFIG["summary"]
    size = {"concurrency": cfg["concurrency"], "requests": cfg["requests"], "warmup": cfg["warmup"]}
    return {"list": load(base, **size), "summary": load(base, **size, path=path)}


async def _first_events(base: str, clients: int) -> list[float | None]:
    async def one(http: httpx.AsyncClient) -> float | None:
        t0 = time.perf_counter()
        try:
            async with http.stream("GET", "/api/events", params={"timeout": 30}) as res:
                if res.status_code != 200:
                    return None
                async for line in res.aiter_lines():
                    if line == "":  # the end of the first event (a comment line has none before it)
                        return time.perf_counter() - t0
        except httpx.HTTPError:
            return None
        return None

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=0)
    timeout = httpx.Timeout(60)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as http:
        return await asyncio.gather(*(one(http) for _ in range(clients)))


def measure_first_event(base: str, url: str) -> dict[str, Any]:
    """Returns the times until the first event of clients that open the stream at once (e)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        active = conn.scalar(text("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')"))
    engine.dispose()
    clients = CONFIG["first_event"]["clients"]
    times = asyncio.run(_first_events(base, clients))
    got = sorted(t for t in times if t is not None)
    return {
        "clients": clients,
        "active": active,
        "served": len(got),
        "p50_s": statistics.median(got) if got else math.nan,
        "p95_s": percentile(got, 95),
        "max_s": got[-1] if got else math.nan,
    }


def sweep_body(points: int) -> dict[str, Any]:
    """Returns a sweep of `points` ISRL-DP MB-SGD runs on digits over ε."""
    return {
        "name": "benchmark",
        "base": SPEC,
        "grid": {"privacy.epsilon": [round(0.1 + 0.05 * i, 4) for i in range(points)]},
    }


def measure_sweep(base: str) -> dict[str, Any] | None:
    """Returns the submission times of the sweep (s), or None when POST /api/sweeps does not exist."""
    cfg = CONFIG["sweep"]
    body = sweep_body(cfg["points"])
    times = []
    with httpx.Client(base_url=base, timeout=60) as http:
        for i in range(cfg["repeats"] + 1):  # the first is the warm-up
            t0 = time.perf_counter()
            res = http.post("/api/sweeps", json=body)
            elapsed = time.perf_counter() - t0
            if res.status_code in (404, 405):
                return None
            if res.status_code != 201:
                raise RuntimeError(f"POST /api/sweeps: HTTP {res.status_code}: {res.text[:500]}")
            if i:
                times.append(elapsed)
    return {"median_s": statistics.median(times), "max_s": max(times), "repeats": len(times)}


class EventReader(threading.Thread):
    """Reads `GET /api/events` and notes when each `run` event arrives (perf_counter seconds)."""

    def __init__(self, base: str, timeout_s: float):
        super().__init__(daemon=True, name="sse")
        self.base, self.timeout_s = base, timeout_s
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.status: int | None = None
        self.connected = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.stream(
                "GET",
                f"{self.base}/api/events",
                params={"timeout": self.timeout_s},
                timeout=httpx.Timeout(10, read=self.timeout_s + 30),
            ) as res:
                self.status = res.status_code
                self.connected.set()
                if res.status_code != 200:
                    return
                kind, data = None, None
                for line in res.iter_lines():
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data = line[5:].strip()
                    elif line == "" and data is not None:
                        if kind == "run":
                            self.events.append((time.perf_counter(), json.loads(data)))
                        kind, data = None, None
        except BaseException as exc:  # reported by the caller
            self.error = exc
        finally:
            self.connected.set()


def measure_events(base: str, url: str, running: list[str]) -> dict[str, Any] | None:
    """Returns the lag of events behind database updates (s), or None when /api/events does not exist."""
    cfg = CONFIG["events"]
    ids = running[: cfg["runs"]]
    assert len(ids) == cfg["runs"], f"only {len(ids)} running runs seeded"
    ticks = round(cfg["hz"] * cfg["seconds"])
    engine = create_engine(url, pool_size=cfg["runs"] + 2)
    with engine.begin() as conn:  # rounds enough for the updates below
        conn.execute(update(Run).where(Run.id.in_(ids)).values(rounds=10_000, current_round=0))
    reader = EventReader(base, timeout_s=cfg["seconds"] + 8)
    reader.start()
    reader.connected.wait(15)
    if reader.status in (404, 405):
        engine.dispose()
        return None
    if reader.status != 200:
        raise RuntimeError(f"GET /api/events: HTTP {reader.status} ({reader.error})")
    time.sleep(1.5)  # the snapshot of active runs arrives first
    committed: list[tuple[str, int, float]] = []
    lock = threading.Lock()
    start = time.perf_counter() + 0.2

    def run_worker(run_id: str) -> None:  # one thread and connection per run, as its worker writes
        with engine.connect() as conn:
            for tick in range(1, ticks + 1):
                pause = start + (tick - 1) / cfg["hz"] - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                values = {
                    "current_round": tick,
                    "progress": tick / 10_000,
                    "updated_at": dt.datetime.now(dt.UTC),
                }
                conn.execute(update(Run).where(Run.id == run_id).values(**values))
                conn.commit()
                with lock:
                    committed.append((run_id, tick, time.perf_counter()))

    workers = [threading.Thread(target=run_worker, args=(run_id,)) for run_id in ids]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=cfg["seconds"] + 60)
    rate = len(committed) / (time.perf_counter() - start)
    reader.join(timeout=cfg["seconds"] + 40)
    engine.dispose()
    arrivals: dict[str, list[tuple[float, int]]] = {run_id: [] for run_id in ids}
    for at, data in reader.events:
        if data["id"] in arrivals:
            arrivals[data["id"]].append((at, data["current_round"]))
    lags, missed = [], 0
    for run_id, tick, at in committed:
        seen = [t for t, r in arrivals[run_id] if r >= tick and t >= at - 0.001]
        if seen:
            lags.append(max(min(seen) - at, 0.0))
        else:
            missed += 1
    lags.sort()
    return {
        "updates": len(committed),
        "events": sum(len(a) for a in arrivals.values()),
        "missed": missed,
        "p50_s": percentile(lags, 50),
        "p95_s": percentile(lags, 95),
        "max_s": lags[-1] if lags else math.nan,
        "rate_hz": rate,
    }


def _ms(x: float) -> str:
    return f"{x:.1f}"


def server_errors(log: Path) -> list[str]:
    """Returns the distinct exception lines of the server's log (what a 500 was)."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    found = {line.strip() for line in lines if not line.startswith(" ") and "Error:" in line}
    return sorted(found)[:5]


def summary_rows(pair: dict[str, dict[str, Any]], first: dict[str, Any]) -> tuple[list[str], bool, bool]:
    """Returns the table rows of (d) and (e), and whether each met its target."""
    cfg = CONFIG
    lst, summ = pair["list"], pair["summary"]
    ratio = cfg["summary"]["target_ratio"]
    summary_met = (
        summ["p50_ms"] <= ratio * lst["p50_ms"]
        and summ["p99_ms"] <= ratio * lst["p99_ms"]
        and summ["errors"] == lst["errors"] == 0
    )
    conns = cfg["summary"]["concurrency"]
    rows = []
    measured = ((f"`GET {cfg['list']['path']}`", lst, False), ("`GET /api/sweeps/{id}/summary`", summ, True))
    for name, res, is_summary in measured:
        rows.append(
            f"| (d) {name}, {cfg['sweep_runs']}-run sweep seeded, {conns} connections: p50 / p95 / p99 / max "
            f"| {_ms(res['p50_ms'])} / {_ms(res['p95_ms'])} / **{_ms(res['p99_ms'])}** / "
            f"{_ms(res['max_ms'])} ms "
            f"({res['requests']:,} requests, {res['throughput_rps']:,.0f}/s, {res['errors']} errors) "
            + (
                f"| p50 and p99 ≤ {ratio:g}× the list's | {'yes' if summary_met else 'NO'} |"
                if is_summary
                else "| — | — |"
            )
        )
    fe = cfg["first_event"]
    first_met = first["p50_s"] < fe["target_median_s"] and first["served"] == first["clients"]
    rows.append(
        f"| (e) `GET /api/events`, {first['clients']} clients at once, {first['active']:,} runs queued or "
        f"running: time to first event p50 / p95 / max | **{first['p50_s']:.3f}** / {first['p95_s']:.3f} / "
        f"{first['max_s']:.3f} s ({first['served']} of {first['clients']} served) "
        f"| median < {fe['target_median_s']:g} s | {'yes' if first_met else 'NO'} |"
    )
    return rows, summary_met, first_met


def table(
    lists: dict[str, dict[str, Any]],
    sweep: dict | None,
    events: dict | None,
    errors: list[str],
    pair: dict[str, dict[str, Any]],
    first: dict[str, Any],
) -> tuple[str, bool]:
    """Returns the markdown of the results, and whether every measured target was met."""
    cfg, ok = CONFIG, True
    loaded, single = lists["loaded"], lists["single"]
    list_met = loaded["p99_ms"] < cfg["list_target_p99_ms"] and loaded["errors"] == 0
    needed = loaded["concurrency"] / cfg["list_target_p99_ms"] * 1e3  # Little's law
    error_note = (
        f"; {loaded['errors']} failed, {loaded['errors_measured']} of them measured, with "
        f"`{loaded['first_error'][:40]}` after {loaded['error_median_s']:.1f} s (median)"
        if loaded["errors"]
        else ", no errors"
    )
    ok &= list_met
    rows = [
        "| measure | result | target | met |",
        "|---|---|---|:-:|",
        f"| (a) `GET {cfg['list']['path']}`, {loaded['concurrency']} concurrent connections: "
        f"p50 / p95 / p99 / max | {_ms(loaded['p50_ms'])} / {_ms(loaded['p95_ms'])} / "
        f"**{_ms(loaded['p99_ms'])}** / {_ms(loaded['max_ms'])} ms "
        f"({loaded['requests']:,} requests{error_note}) "
        f"| p99 < {cfg['list_target_p99_ms']:g} ms | {'yes' if list_met else 'NO'} |",
        f"| (a) throughput under that load | {loaded['throughput_rps']:,.0f} requests/s "
        f"(closed loop, so a mean wait of {loaded['concurrency']} / throughput = "
        f"{loaded['concurrency'] / loaded['throughput_rps'] * 1e3:,.0f} ms) "
        f"| ≥ {needed:,.0f} requests/s, what a wait under {cfg['list_target_p99_ms']:g} ms takes | — |",
        f"| (a) reference: one connection, p50 / p95 / p99 | {_ms(single['p50_ms'])} / "
        f"{_ms(single['p95_ms'])} / {_ms(single['p99_ms'])} ms ({single['throughput_rps']:,.0f} requests/s) "
        "| — | — |",
    ]
    points = cfg["sweep"]["points"]
    if sweep is None:
        rows.append(
            f"| (b) `POST /api/sweeps`, {points} points | not measured: endpoint not present | < 1 s | — |"
        )
    else:
        met = sweep["median_s"] < cfg["sweep"]["target_s"]
        ok &= met
        rows.append(
            f"| (b) `POST /api/sweeps`, {points} points: median (max) of {sweep['repeats']} "
            f"| **{sweep['median_s']:.3f} s** ({sweep['max_s']:.3f} s) | < {cfg['sweep']['target_s']:g} s "
            f"| {'yes' if met else 'NO'} |"
        )
    ev = cfg["events"]
    label = f"(c) `GET /api/events`, {ev['runs']} runs updated at {ev['hz']:g} Hz for {ev['seconds']:g} s"
    if events is None:
        rows.append(
            f"| {label} | not measured: endpoint not present | p95 lag < {ev['target_p95_s']:g} s | — |"
        )
    else:
        met = events["p95_s"] < ev["target_p95_s"] and events["missed"] == 0
        ok &= met
        rows.append(
            f"| {label}: lag p50 / p95 / max | {events['p50_s']:.3f} / **{events['p95_s']:.3f}** / "
            f"{events['max_s']:.3f} s ({events['updates']:,} updates at {events['rate_hz']:.0f}/s, "
            f"{events['events']:,} events, {events['missed']} never shown) "
            f"| p95 lag < {ev['target_p95_s']:g} s | {'yes' if met else 'NO'} |"
        )
    more, summary_met, first_met = summary_rows(pair, first)
    rows += more
    ok &= summary_met and first_met
    with psycopg.connect(CONFIG["postgres_admin"]) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
    text_ = "\n".join(
        [
            f"A fresh Postgres database with {cfg['runs']:,} runs and {cfg['metrics_per_run']} metric rows "
            f"each, a sweep of {cfg['sweep_runs']} runs (90% succeeded) and queued runs up to "
            f"{cfg['active_runs']:,} queued or running; the app served by one uvicorn process on "
            "loopback, Redis as the broker. (a) is "
            "measured from a second process (`benchmarks/api_load.py`, closed loop: each connection "
            f"sends its next request when the last one is answered; {cfg['list']['warmup']} warm-up "
            "requests first; enough requests to span several expiries of the list's 1 s micro-cache, "
            "`backend/runs/pages.py`, whose pages are rebuilt in the background: a rebuild is one query "
            "and serialisation, about 12 ms, the list's cost before the cache). (b) creates the "
            "sweep's 200 runs and queues them. (c) counts the time from "
            "an update's commit to the first event showing that run at that round or later (the stream "
            "coalesces updates between its polls). (d) runs the list and the summary one after the other "
            "under the same load; the summary is served from the same micro-cache, cleared by writes "
            "through the API. (e) opens the streams together (httpx, one asyncio loop); a new stream "
            "starts with one compact `snapshot` event of the active runs, read once and shared by the "
            "streams that start within 1 s.",
            "",
            *rows,
            "",
            *(
                [f"Errors in the server log during the run: {'; '.join(f'`{e}`' for e in errors)}.", ""]
                if errors
                else []
            ),
            f"Machine: {platform.platform()}, {os.cpu_count()} cores (server, load generator and "
            f"database share them), Python {platform.python_version()}, uvicorn {uvicorn.__version__}, "
            f"PostgreSQL {pg}.",
        ]
    )
    return text_, ok


def headline(
    lists: dict[str, dict[str, Any]],
    sweep: dict | None,
    events: dict | None,
    ok: bool,
    pair: dict[str, dict[str, Any]],
    first: dict[str, Any],
) -> None:
    """Prints the JSON line of headline numbers that benchmarks/all.py reads."""
    loaded, cfg = lists["loaded"], CONFIG
    parts = [f"p99 {loaded['p99_ms']:.1f} ms at {loaded['concurrency']} connections"]
    targets = [f"p99 < {cfg['list_target_p99_ms']:g} ms"]
    parts.append(
        f"sweep summary p99 {pair['summary']['p99_ms']:.1f} ms vs list {pair['list']['p99_ms']:.1f} ms"
    )
    targets.append(f"≤ {cfg['summary']['target_ratio']:g}×")
    parts.append(f"first event p50 {first['p50_s']:.3f} s at {first['clients']} clients")
    targets.append(f"< {cfg['first_event']['target_median_s']:g} s")
    if sweep is not None:
        parts.append(f"sweep of {cfg['sweep']['points']} in {sweep['median_s']:.3f} s")
        targets.append(f"< {cfg['sweep']['target_s']:g} s")
    if events is not None:
        parts.append(f"events p95 lag {events['p95_s']:.3f} s")
        targets.append(f"< {cfg['events']['target_p95_s']:g} s")
    print_headline(
        "api",
        headline="; ".join(parts),
        target="; ".join(targets),
        met=ok,
        list_p99_ms=loaded["p99_ms"],
        list_throughput_rps=loaded["throughput_rps"],
        list_errors=loaded["errors"],
        sweep_median_s=None if sweep is None else sweep["median_s"],
        events_p95_s=None if events is None else events["p95_s"],
        summary_p99_ms=pair["summary"]["p99_ms"],
        summary_list_p99_ms=pair["list"]["p99_ms"],
        first_event_p50_s=first["p50_s"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    client = redis.Redis.from_url(CONFIG["redis"])
    client.flushdb()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="dpfl-bench-") as tmp,
            fresh_database(CONFIG["postgres_admin"]) as url,
        ):
            t0 = time.perf_counter()
            running, sweep_id = seed(
                url, **{k: CONFIG[k] for k in ("runs", "metrics_per_run", "sweep_runs", "active_runs")}
            )
            print(f"seeded {CONFIG['runs']:,} runs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            with server(url, Path(tmp)) as base:
                lists = measure_list(base)
                print(f"list: {json.dumps(lists)}", file=sys.stderr)
                pair = measure_summary(base, sweep_id)
                print(f"summary: {json.dumps(pair)}", file=sys.stderr)
                first = measure_first_event(base, url)
                print(f"first event: {first}", file=sys.stderr)
                events = measure_events(base, url, running)
                print(f"events: {events}", file=sys.stderr)
                sweep = measure_sweep(base)
                print(f"sweep: {sweep}", file=sys.stderr)
            errors = server_errors(Path(tmp) / "uvicorn.log")
    finally:
        client.flushdb()  # the sweeps' messages: no worker ever runs them
        client.close()
    body, ok = table(lists, sweep, events, errors, pair, first)
    publish("API: runs list, sweep submission and live events", body, write=not args.no_write)
    headline(lists, sweep, events, ok, pair, first)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

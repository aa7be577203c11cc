"""The database the API benchmark measures (benchmarks/api.py): runs, metrics, a sweep.

Rows are inserted directly, as a worker would have left them, so the benchmark times the API
and not the runs: finished, running and queued runs with their metrics, one large sweep, and
enough queued runs to reach a given number of active ones.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
from sqlalchemy import create_engine, insert, text

from backend import migrate
from backend.models import RoundMetric, Run, Sweep

__all__ = ["SPEC", "fresh_database", "seed"]

SPEC = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.5, "batch_size": 64, "clip": 1.0},
    "dataset": {"name": "digits", "silos": 4},
    "model": {"name": "mlp", "hidden": [32]},
    "rounds": 20,
    "privacy": {"epsilon": 1.0, "delta": 1e-5},
}


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """Yields the URL of a new, migrated Postgres database; drops it afterwards."""
    name = f"dpfl_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(
    url: str, *, runs: int, metrics_per_run: int, sweep_runs: int, active_runs: int
) -> tuple[list[str], str]:
    """Inserts the runs and their metrics, a sweep of `sweep_runs` runs and queued runs up to
    `active_runs` active; returns the ids of the runs seeded as running, and the sweep's id."""
    rng = random.Random(0)
    now = dt.datetime.now(dt.UTC)
    statuses = ["succeeded"] * 85 + ["failed"] * 8 + ["cancelled"] * 5 + ["running", "queued"]
    count = runs
    rows, metrics, running = [], [], []
    for i in range(count):
        algorithm = rng.choice(["isrl_mbsgd", "fedavg"])
        private = algorithm != "fedavg"
        target = rng.choice([0.5, 1.0, 2.0, 4.0, 8.0]) if private else None
        status = rng.choice(statuses)
        # a minute apart, the newest an hour ago: every run has finished (or last written) by now
        created = now - dt.timedelta(seconds=3600 + (count - i) * 60 + rng.random())
        started = created + dt.timedelta(seconds=rng.uniform(0.1, 5))
        finished = started + dt.timedelta(seconds=rng.uniform(5, 300)) if status != "running" else None
        rounds = 100
        run_id = uuid.uuid4().hex[:16]
        done = rounds if status == "succeeded" else rng.randint(0, rounds - 1)
        spec = SPEC | {
            "algorithm": algorithm,
            "rounds": rounds,
            "seed": i,
            "privacy": None if target is None else {"epsilon": target, "delta": 1e-5},
        }
        rows.append(
            {
                "id": run_id,
                "created_at": created,
                "updated_at": finished or started,
                "status": status,
                "algorithm": algorithm,
                "dataset": rng.choice(["digits", "mnist", "heart", "adult"]),
                "sweep_id": None,
                "spec": spec,
                "rounds": rounds,
                "current_round": done,
                "progress": done / rounds,
                "notion": "record" if private else "none",
                "target_epsilon": target,
                "projected_epsilon": target,
                "epsilon": None if target is None else target * done / rounds,
                "delta": 1e-5 if private else None,
                "accountant": "rdp" if private else None,
                "noise_multiplier": rng.uniform(0.5, 5) if private else None,
                "final_accuracy": rng.uniform(0.5, 0.98) if done else None,
                "final_loss": rng.uniform(0.05, 2.0) if done else None,
                "diagnostics": {
                    "label_histogram": [[rng.randint(0, 500) for _ in range(10)] for _ in range(4)]
                },
                "timings": {"setup_s": 0.4, "train_s": 12.0, "eval_s": 1.1, "total_s": 13.5},
                "error": "internal error in worker (run x); see worker log" if status == "failed" else None,
                "worker": "w1@bench",
                "attempts": 1,
                "cancel_requested": status == "cancelled",
                "started_at": started,
                "finished_at": finished,
                "heartbeat_at": finished or now,
            }
        )
        if status == "running":
            running.append(run_id)
        for k in range(1, metrics_per_run + 1):
            metrics.append(
                {
                    "run_id": run_id,
                    "round": k * rounds // metrics_per_run,
                    "accuracy": rng.uniform(0.1, 0.98),
                    "loss": rng.uniform(0.05, 2.3),
                    "epsilon": None if target is None else target * k / metrics_per_run,
                    "metrics": {},
                    "diagnostics": {"clip_fraction": rng.random(), "train_loss": rng.uniform(0.05, 2.3)},
                }
            )
    sweep_id, sweep_runs = seed_sweep(rng, now, rows[0], count=sweep_runs)
    rows += sweep_runs
    active = sum(r["status"] in ("queued", "running") for r in rows)
    for k in range(active_runs - active):  # older than every other run: off the list's page
        created = now - dt.timedelta(days=30, seconds=k)
        rows.append(
            rows[0]
            | {
                "id": uuid.uuid4().hex[:16],
                "created_at": created,
                "updated_at": created,
                "status": "queued",
                "current_round": 0,
                "progress": 0.0,
                "epsilon": None,
                "final_accuracy": None,
                "final_loss": None,
                "error": None,
                "worker": None,
                "started_at": None,
                "finished_at": None,
                "heartbeat_at": None,
            }
        )
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            insert(Sweep.__table__),
            [
                {
                    "id": sweep_id,
                    "name": "benchmark",
                    "created_at": now - dt.timedelta(days=1),
                    "base": SPEC,
                    "grid": {"privacy.epsilon": [0.5, 1, 2, 4, 8], "seed": list(range(60))},
                    "num_runs": len(sweep_runs),
                }
            ],
        )
        for table, batch in ((Run.__table__, rows), (RoundMetric.__table__, metrics)):
            for start in range(0, len(batch), 5000):
                conn.execute(insert(table), batch[start : start + 5000])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE"))
    engine.dispose()
    return running, sweep_id


def seed_sweep(
    rng: random.Random, now: dt.datetime, template: dict[str, Any], *, count: int
) -> tuple[str, list[dict]]:
    """Returns a sweep id and its runs: two algorithms × five ε × 60 seeds, most succeeded."""
    sweep_id, runs = uuid.uuid4().hex[:16], []
    for i in range(count):
        algorithm = ("isrl_mbsgd", "fedavg")[i % 2]
        target = None if algorithm == "fedavg" else (0.5, 1.0, 2.0, 4.0, 8.0)[i // 2 % 5]
        status = rng.choice(["succeeded"] * 17 + ["failed", "running", "queued"])
        done = 100 if status == "succeeded" else rng.randint(0, 99)
        created = now - dt.timedelta(days=1, seconds=-i)
        spec = SPEC | {
            "algorithm": algorithm,
            "seed": i // 10,
            "privacy": None if target is None else {"epsilon": target, "delta": 1e-5},
        }
        runs.append(
            template
            | {
                "id": uuid.uuid4().hex[:16],
                "created_at": created,
                "updated_at": created,
                "status": status,
                "algorithm": algorithm,
                "dataset": "digits",
                "sweep_id": sweep_id,
                "spec": spec,
                "current_round": done,
                "progress": done / 100,
                "notion": "none" if target is None else "record",
                "target_epsilon": target,
                "projected_epsilon": target,
                "epsilon": None if target is None else target * done / 100,
                "delta": None if target is None else 1e-5,
                "accountant": None if target is None else "rdp",
                "noise_multiplier": None if target is None else rng.uniform(0.5, 5),
                "final_accuracy": rng.uniform(0.5, 0.98) if done else None,
                "error": "internal error in worker (run x); see worker log" if status == "failed" else None,
                "cancel_requested": False,
                "finished_at": None if status in ("queued", "running") else created,
            }
        )
    return sweep_id, runs

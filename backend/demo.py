"""The first-visit state: a small sweep on the bundled digits data, so curves appear within a minute."""

from __future__ import annotations

from sqlalchemy import func, select

from backend.db import Database
from backend.dispatch import send
from backend.models import Sweep
from backend.queue import make_celery
from backend.settings import Settings
from backend.sweeps import service as sweeps

__all__ = ["DEMO_BASE", "DEMO_GRID", "seed_demo"]

DEMO_BASE = {
    "algorithm": "isrl_mbsgd",
    "params_by_algorithm": {"isrl_mbsgd": {"lr": 0.5, "batch_size": 64, "clip": 1.0}},
    "dataset": {"name": "digits", "silos": 10, "partition": {"kind": "iid"}},
    "model": {"name": "mlp", "hidden": [64]},
    "rounds": 25,
    "eval_every": 5,
    "privacy": {"epsilon": 1.0, "delta": 1e-5},
}
DEMO_GRID = {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [0.5, 1, 2, 4, 8], "seed": [0, 1]}


def seed_demo(settings: Settings) -> str | None:
    """Queues the demo sweep if the database has no sweep yet; returns its id (None if it had one)."""
    database = Database(settings.database_url)
    with database.session() as session:
        if session.scalar(select(func.count()).select_from(Sweep)):
            return None
        sweep, runs = sweeps.create_sweep(
            session,
            name="demo: digits, ISRL-DP against FedAvg",
            base=DEMO_BASE,
            grid=DEMO_GRID,
            settings=settings,
        )
    send(database, make_celery(settings), [run.id for run in runs])
    return sweep.id

"""benchmarks/api_data.py: the database the API and page-load benchmarks seed."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from backend import migrate
from benchmarks.api_data import seed


def test_seed_inserts_the_runs_their_metrics_the_sweep_and_the_active_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    migrate.upgrade(url)
    running, sweep = seed(url, runs=30, metrics_per_run=4, sweep_runs=20, active_runs=12)
    engine = create_engine(url)
    with engine.connect() as conn:
        count = lambda sql: conn.execute(text(sql)).scalar_one()  # noqa: E731
        assert count(f"SELECT count(*) FROM runs WHERE sweep_id = '{sweep}'") == 20
        assert count("SELECT count(*) FROM round_metrics") == 30 * 4
        # the 30 runs and the sweep's 20 hold fewer than 12 active ones: queued runs make up the rest
        assert count("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')") == 12
        assert count("SELECT count(*) FROM runs WHERE sweep_id IS NULL AND status = 'succeeded'") >= 20
        running_rows = conn.execute(text("SELECT id FROM runs WHERE status = 'running' AND sweep_id IS NULL"))
        assert set(running) == {run_id for (run_id,) in running_rows}
    engine.dispose()

"""Migrations against real databases (a fresh Postgres database and a fresh SQLite file).

Upgrading to head creates exactly the models' tables and columns, and Alembic's autogenerate
comparison finds nothing left to migrate (what `alembic check` reports); downgrading to base
removes every table; upgrading again works. The app refuses an un-migrated database and names
the command that fixes it, and that command works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

import backend.models  # noqa: F401  (registers every table on Base.metadata)
from backend import migrate
from backend.db import Base
from backend.main import NotMigrated, create_app
from tests.backend.conftest import PG_ADMIN, ROOT, make_settings

pytestmark = pytest.mark.service


@pytest.fixture(params=["postgres", "sqlite"])
def empty_url(request, tmp_path) -> Iterator[str]:
    """A database that no migration has touched: a new Postgres database, or a new SQLite file."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    name = f"dpfl_migrations_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def schema(url: str) -> dict[str, set[str]]:
    """Returns {table: column names} of the database at `url`, without Alembic's own table."""
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        return {
            t: {c["name"] for c in inspector.get_columns(t)}
            for t in inspector.get_table_names()
            if t != "alembic_version"
        }
    finally:
        engine.dispose()


def model_schema() -> dict[str, set[str]]:
    return {name: {c.name for c in table.columns} for name, table in Base.metadata.tables.items()}


def differences(url: str) -> list:
    """Returns what autogenerate would still migrate: the models against the database's schema."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def test_upgrade_creates_the_models_schema_and_downgrade_removes_it(empty_url):
    assert schema(empty_url) == {}
    migrate.upgrade(empty_url)
    assert schema(empty_url) == model_schema()
    assert differences(empty_url) == []
    engine = create_engine(empty_url)
    assert migrate.current_revision(engine) == migrate.head_revision()

    migrate.downgrade(empty_url, "base")
    assert schema(empty_url) == {}  # only alembic_version may remain
    assert migrate.current_revision(engine) is None

    migrate.upgrade(empty_url)
    assert schema(empty_url) == model_schema()
    assert differences(empty_url) == []
    assert migrate.current_revision(engine) == migrate.head_revision()
    engine.dispose()


def test_each_revision_downgrades_to_the_one_before(empty_url):
    script = ScriptDirectory(str(ROOT / "migrations"))
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]  # oldest first
    for rev in revisions:
        migrate.upgrade(empty_url, rev)
    for previous in [*reversed(revisions[:-1]), "base"]:
        migrate.downgrade(empty_url, previous)
    assert schema(empty_url) == {}


def test_app_refuses_an_unmigrated_database_naming_the_command(empty_url, tmp_path):
    settings = make_settings(tmp_path, empty_url)
    with pytest.raises(NotMigrated, match=r"is at revision none, not \w+; run `dpfl db upgrade`"):
        create_app(settings)


def test_dpfl_db_upgrade_leaves_the_database_at_head(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    dpfl = Path(sys.executable).with_name("dpfl")
    command = [str(dpfl)] if dpfl.exists() else [sys.executable, "-m", "dpfl"]
    env = os.environ | {"DPFL_DATABASE_URL": url, "DPFL_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [*command, "db", "upgrade"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "database at revision head"
    engine = create_engine(url)
    assert migrate.current_revision(engine) == migrate.head_revision()
    engine.dispose()
    assert schema(url) == model_schema()
    create_app(make_settings(tmp_path, url))  # and the app now starts on it


def test_0003_moves_stored_noiseless_outputs_out_of_the_public_columns(empty_url):
    """Runs stored before revision 0003 served vote histograms, train loss and clip fractions as
    private; the upgrade moves them to the withheld and diagnostic columns, and back down again."""
    migrate.upgrade(empty_url, "0002")
    engine = create_engine(empty_url)
    vote = {"kind": "vote", "noise_std": 20.0, "sensitivity": 1.0, "counts": [3.0, 1.0]}
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO runs (id, created_at, updated_at, status, algorithm, dataset, spec, rounds, "
            "current_round, progress, notion, label_histogram, users, attempts, cancel_requested) VALUES "
            "('r1', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'succeeded', 'ae_dpfl', 'digits', '{}', 1, 1, 1.0, "
            "'agent', '[[1, 2]]', NULL, 0, false)"
        )
        conn.exec_driver_sql(
            "INSERT INTO round_metrics (run_id, round, accuracy, loss, train_loss, epsilon, metrics) VALUES "
            "('r1', 1, 0.5, 1.0, 0.7, 0.9, '{\"label_accuracy\": 0.8, \"mean_vote_gap\": 2.0}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO ledger_events (run_id, round, party, events) VALUES ('r1', 1, 'agents', '"
            + json.dumps([vote])
            + "')"
        )
    migrate.upgrade(empty_url, "0003")
    with engine.connect() as conn:
        run = conn.exec_driver_sql("SELECT diagnostics, protected FROM runs").one()
        metric = conn.exec_driver_sql("SELECT metrics, diagnostics FROM round_metrics").one()
        row = conn.exec_driver_sql("SELECT events, withheld FROM ledger_events").one()
    load = lambda v: json.loads(v) if isinstance(v, str) else v  # noqa: E731 (SQLite returns text)
    assert load(run[0])["label_histogram"] == [[1, 2]] and not run[1]
    assert load(metric[0]) == {"label_accuracy": 0.8}
    assert load(metric[1]) == {"mean_vote_gap": 2.0, "train_loss": 0.7}
    assert load(row[0]) == [vote | {"counts": None}] and load(row[1]) == [{"counts": [3.0, 1.0]}]
    migrate.downgrade(empty_url, "0002")
    with engine.connect() as conn:
        assert load(conn.exec_driver_sql("SELECT events FROM ledger_events").scalar()) == [vote]
        assert conn.exec_driver_sql("SELECT train_loss FROM round_metrics").scalar() == 0.7
    engine.dispose()


def test_0006_gives_existing_runs_and_sweeps_empty_annotations(empty_url):
    """Rows stored before revision 0006 come out unnamed, untagged, without notes and not
    archived; the downgrade drops the columns and keeps the rows."""
    migrate.upgrade(empty_url, "0005")
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO sweeps (id, created_at, name, base, grid, num_runs) "
            "VALUES ('s1', CURRENT_TIMESTAMP, 'grid', '{}', '{}', 1)"
        )
        conn.exec_driver_sql(
            "INSERT INTO runs (id, created_at, updated_at, status, algorithm, dataset, sweep_id, spec, "
            "rounds, current_round, progress, notion, attempts, cancel_requested) VALUES ('r1', "
            "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'queued', 'fedavg', 'digits', 's1', '{\"seed\": 3}', "
            "1, 0, 0.0, 'none', 0, false)"
        )
    migrate.upgrade(empty_url, "0006")
    load = lambda v: json.loads(v) if isinstance(v, str) else v  # noqa: E731 (SQLite returns text)
    with engine.connect() as conn:
        name, tags, notes, archived = conn.exec_driver_sql(
            "SELECT name, tags, notes, archived FROM runs"
        ).one()
        assert (name, load(tags), notes, bool(archived)) == ("", [], "", False)
        tags, notes, archived = conn.exec_driver_sql("SELECT tags, notes, archived FROM sweeps").one()
        assert (load(tags), notes, bool(archived)) == ([], "", False)
    migrate.downgrade(empty_url, "0005")
    assert "tags" not in schema(empty_url)["runs"] and "archived" not in schema(empty_url)["sweeps"]
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT id, sweep_id FROM runs").one() == ("r1", "s1")
    engine.dispose()


def test_two_upgrades_started_together_on_a_fresh_database_both_succeed(empty_url):
    """Two `dpfl up` on one fresh home: each migrates; the second died in a batch migration
    (`_alembic_tmp_runs already exists`) before migrations were serialised."""
    code = f"from backend import migrate; migrate.upgrade({empty_url!r})"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-600:] for e in errors]
    assert differences(empty_url) == []


def test_0013_adds_balanced_accuracy_as_none_for_rounds_recorded_before(empty_url):
    """Round metrics stored before revision 0013 have no balanced accuracy (None, not 0); the
    downgrade drops the column and keeps the rows."""
    migrate.upgrade(empty_url, "0012")
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO runs (id, created_at, updated_at, status, algorithm, dataset, spec, rounds, "
            "current_round, progress, notion, attempts, cancel_requested, name, tags, notes, archived) "
            "VALUES ('r1', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'succeeded', 'uldp_avg', 'creditcard', "
            "'{}', 1, 1, 1.0, 'user', 1, false, '', '[]', '', false)"
        )
        conn.exec_driver_sql(
            "INSERT INTO round_metrics (run_id, round, accuracy, loss, epsilon) "
            "VALUES ('r1', 1, 0.998, 0.1, 2.0)"
        )
    migrate.upgrade(empty_url, "0013")
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT accuracy, balanced_accuracy FROM round_metrics").one() == (
            0.998,
            None,
        )
        conn.exec_driver_sql("UPDATE round_metrics SET balanced_accuracy = 0.5")
        assert conn.exec_driver_sql("SELECT balanced_accuracy FROM round_metrics").scalar_one() == 0.5
    migrate.downgrade(empty_url, "0012")
    assert "balanced_accuracy" not in schema(empty_url)["round_metrics"]
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT run_id, round, accuracy FROM round_metrics").one() == (
            "r1",
            1,
            0.998,
        )
    engine.dispose()

"""separate what is not private: withheld vote histograms, diagnostics, caveats, protected runs

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 12:00:00

Stored rows are moved too, so no run served before this revision keeps a noiseless output among
its private ones: vote histograms leave `ledger_events.events` for `ledger_events.withheld`;
`train_loss` and every round metric its algorithm does not release privately move to
`round_metrics.diagnostics`; `runs.label_histogram` and `runs.users` move to
`runs.diagnostics`. The private metric names below are a snapshot of the algorithms'
`private_metrics` at this revision (a revision imports no app code).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_VOTING = {"queries_answered", "label_accuracy", "votes_cached", "epsilon_data_independent"}
_PRIVATE_METRICS: dict[str, set[str]] = {
    "isrl_spider": {"phase_start"},
    "sdp_mbsgd": {"round_epsilon", "local_epsilon", "noise_bits"},
    "uldp_naive": {"silo_noise_std"},
    "uldp_sgd": {"silo_noise_std", "update_noise_std"},
    "uldp_avg": {"silo_noise_std", "update_noise_std"},
    "uldp_avg_w": {"silo_noise_std", "update_noise_std"},
    "uldp_group": {"group_size"},
    "ae_dpfl": _VOTING,
    "knn_dpfl": _VOTING,
    "dp_fedavg": {"clip"},
}
_LABEL = "not private: computed from the private data without noise, not covered by the ledger's ε"

runs = sa.table(
    "runs",
    sa.column("id", sa.String),
    sa.column("algorithm", sa.String),
    sa.column("label_histogram", sa.JSON),
    sa.column("users", sa.JSON),
    sa.column("diagnostics", sa.JSON),
)
metrics = sa.table(
    "round_metrics",
    sa.column("id", sa.Integer),
    sa.column("run_id", sa.String),
    sa.column("train_loss", sa.Float),
    sa.column("metrics", sa.JSON),
    sa.column("diagnostics", sa.JSON),
)
ledger = sa.table(
    "ledger_events",
    sa.column("id", sa.Integer),
    sa.column("events", sa.JSON),
    sa.column("withheld", sa.JSON),
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("protected", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("caveats", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("diagnostics", sa.JSON(), nullable=True))
    with op.batch_alter_table("round_metrics") as batch:
        batch.add_column(sa.Column("diagnostics", sa.JSON(), nullable=True))
    with op.batch_alter_table("ledger_events") as batch:
        batch.add_column(sa.Column("withheld", sa.JSON(), nullable=True))
    _move_to_diagnostics()
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("label_histogram")
        batch.drop_column("users")
    with op.batch_alter_table("round_metrics") as batch:
        batch.drop_column("train_loss")


def _move_to_diagnostics() -> None:
    conn = op.get_bind()
    algorithms = {}
    for row in conn.execute(sa.select(runs.c.id, runs.c.algorithm, runs.c.label_histogram, runs.c.users)):
        algorithms[row.id] = row.algorithm
        if row.label_histogram is not None or row.users is not None:
            diagnostics = {
                "label": _LABEL,
                "withheld": False,
                "label_histogram": row.label_histogram,
                "users": row.users,
            }
            conn.execute(runs.update().where(runs.c.id == row.id).values(diagnostics=diagnostics))
    rows = sa.select(metrics.c.id, metrics.c.run_id, metrics.c.train_loss, metrics.c.metrics)
    for row in conn.execute(rows):
        private = _PRIVATE_METRICS.get(algorithms.get(row.run_id, ""), set())
        values: dict[str, Any] = row.metrics or {}
        diagnostics = {k: v for k, v in values.items() if k not in private}
        if row.train_loss is not None:
            diagnostics["train_loss"] = row.train_loss
        conn.execute(
            metrics.update()
            .where(metrics.c.id == row.id)
            .values(metrics={k: v for k, v in values.items() if k in private}, diagnostics=diagnostics)
        )
    for row in conn.execute(sa.select(ledger.c.id, ledger.c.events)):
        if not any(isinstance(e, dict) and e.get("counts") is not None for e in row.events or []):
            continue
        public = [{**e, "counts": None} if "counts" in e else e for e in row.events]
        withheld = [{"counts": e["counts"]} if e.get("counts") is not None else None for e in row.events]
        conn.execute(ledger.update().where(ledger.c.id == row.id).values(events=public, withheld=withheld))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("label_histogram", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("users", sa.JSON(), nullable=True))
    with op.batch_alter_table("round_metrics") as batch:
        batch.add_column(sa.Column("train_loss", sa.Float(), nullable=True))
    conn = op.get_bind()
    for row in conn.execute(sa.select(runs.c.id, runs.c.diagnostics)):
        d = row.diagnostics or {}
        conn.execute(
            runs.update()
            .where(runs.c.id == row.id)
            .values(label_histogram=d.get("label_histogram"), users=d.get("users"))
        )
    for row in conn.execute(sa.select(metrics.c.id, metrics.c.metrics, metrics.c.diagnostics)):
        d = dict(row.diagnostics or {})
        train_loss = d.pop("train_loss", None)
        conn.execute(
            metrics.update()
            .where(metrics.c.id == row.id)
            .values(train_loss=train_loss, metrics={**(row.metrics or {}), **d})
        )
    for row in conn.execute(sa.select(ledger.c.id, ledger.c.events, ledger.c.withheld)):
        if row.withheld:
            merged = [{**e, **(w or {})} for e, w in zip(row.events, row.withheld, strict=True)]
            conn.execute(ledger.update().where(ledger.c.id == row.id).values(events=merged))
    with op.batch_alter_table("ledger_events") as batch:
        batch.drop_column("withheld")
    with op.batch_alter_table("round_metrics") as batch:
        batch.drop_column("diagnostics")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("diagnostics")
        batch.drop_column("caveats")
        batch.drop_column("protected")

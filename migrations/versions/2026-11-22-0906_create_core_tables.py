"""create runs, metrics, ledger, sweeps and budgets

Revision ID: 0001
Revises:
Create Date: 2026-11-22 09:06:13.527856
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budgets",
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("total_epsilon", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("dataset", name=op.f("pk_budgets")),
    )
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("base", sa.JSON(), nullable=False),
        sa.Column("grid", sa.JSON(), nullable=False),
        sa.Column("num_runs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sweeps_created_at"), ["created_at"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("algorithm", sa.String(length=64), nullable=False),
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("sweep_id", sa.String(length=32), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("current_round", sa.Integer(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("notion", sa.String(length=16), nullable=False),
        sa.Column("target_epsilon", sa.Float(), nullable=True),
        sa.Column("projected_epsilon", sa.Float(), nullable=True),
        sa.Column("epsilon", sa.Float(), nullable=True),
        sa.Column("delta", sa.Float(), nullable=True),
        sa.Column("accountant", sa.String(length=16), nullable=True),
        sa.Column("noise_multiplier", sa.JSON(), nullable=True),
        sa.Column("final_accuracy", sa.Float(), nullable=True),
        sa.Column("final_loss", sa.Float(), nullable=True),
        sa.Column("label_histogram", sa.JSON(), nullable=True),
        sa.Column("timings", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["sweep_id"], ["sweeps.id"], name=op.f("fk_runs_sweep_id_sweeps"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_algorithm"), ["algorithm"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_dataset"), ["dataset"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_sweep_id"), ["sweep_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_updated_at"), ["updated_at"], unique=False)

    op.create_table(
        "budget_charges",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("reserved", sa.Float(), nullable=False),
        sa.Column("spent", sa.Float(), nullable=True),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset"],
            ["budgets.dataset"],
            name=op.f("fk_budget_charges_dataset_budgets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_budget_charges_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_budget_charges")),
    )
    with op.batch_alter_table("budget_charges", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_budget_charges_dataset"), ["dataset"], unique=False)

    op.create_table(
        "ledger_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("party", sa.String(length=64), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_ledger_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_events")),
        sa.UniqueConstraint("run_id", "round", "party", name=op.f("uq_ledger_events_run_id_round_party")),
    )
    with op.batch_alter_table("ledger_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ledger_events_run_id"), ["run_id"], unique=False)

    op.create_table(
        "round_metrics",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=False),
        sa.Column("loss", sa.Float(), nullable=False),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("epsilon", sa.Float(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_round_metrics_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_round_metrics")),
        sa.UniqueConstraint("run_id", "round", name=op.f("uq_round_metrics_run_id_round")),
    )
    with op.batch_alter_table("round_metrics", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_round_metrics_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("round_metrics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_round_metrics_run_id"))

    op.drop_table("round_metrics")
    with op.batch_alter_table("ledger_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ledger_events_run_id"))

    op.drop_table("ledger_events")
    with op.batch_alter_table("budget_charges", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_budget_charges_dataset"))

    op.drop_table("budget_charges")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_updated_at"))
        batch_op.drop_index(batch_op.f("ix_runs_sweep_id"))
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_dataset"))
        batch_op.drop_index(batch_op.f("ix_runs_created_at"))
        batch_op.drop_index(batch_op.f("ix_runs_algorithm"))

    op.drop_table("runs")
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sweeps_created_at"))

    op.drop_table("sweeps")
    op.drop_table("budgets")

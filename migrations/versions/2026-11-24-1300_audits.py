"""create audits: a run's requested first-round privacy audits, their status and result

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audits",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_audits_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audits")),
    )
    with op.batch_alter_table("audits") as batch:
        batch.create_index(batch.f("ix_audits_created_at"), ["created_at"], unique=False)
        batch.create_index(batch.f("ix_audits_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_index(batch.f("ix_audits_run_id"))
        batch.drop_index(batch.f("ix_audits_created_at"))
    op.drop_table("audits")

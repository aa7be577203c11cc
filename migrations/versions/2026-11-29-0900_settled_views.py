"""create settled_views: a finished run's ledger curves and figures, kept per (run, view, accountant, δ)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settled_views",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("view", sa.String(length=16), nullable=False),
        sa.Column("accountant", sa.String(length=32), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_settled_views_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_settled_views")),
        sa.UniqueConstraint(
            "run_id",
            "view",
            "accountant",
            "delta",
            name=op.f("uq_settled_views_run_id_view_accountant_delta"),
        ),
    )


def downgrade() -> None:
    op.drop_table("settled_views")

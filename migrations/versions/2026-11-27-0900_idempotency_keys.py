"""idempotency keys and phases: a retried POST /api/runs with the same key creates one run; what a
preparing run is doing

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=200), nullable=True))
        batch.create_index(batch.f("ix_runs_idempotency_key"), ["idempotency_key"], unique=True)
        batch.add_column(sa.Column("phase", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("phase")
        batch.drop_index(batch.f("ix_runs_idempotency_key"))
        batch.drop_column("idempotency_key")

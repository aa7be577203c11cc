"""run batches: the runs of a sweep that train together in one worker task

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("batch_id", sa.String(length=36), nullable=True))
        batch.create_index(batch.f("ix_runs_batch_id"), ["batch_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index(batch.f("ix_runs_batch_id"))
        batch.drop_column("batch_id")

"""annotations: a run's name, and each run's and sweep's tags, notes and archived flag

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _annotations() -> list[sa.Column]:
    # server defaults fill the rows that exist: no name, no tags, no notes, not archived
    return [
        sa.Column("tags", sa.JSON(), server_default=sa.text("'[]'"), nullable=False),
        sa.Column("notes", sa.Text(), server_default="", nullable=False),
        sa.Column("archived", sa.Boolean(), server_default=sa.false(), nullable=False),
    ]


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("name", sa.String(length=200), server_default="", nullable=False))
        for column in _annotations():
            batch.add_column(column)
        batch.create_index(batch.f("ix_runs_archived"), ["archived"], unique=False)
    with op.batch_alter_table("sweeps") as batch:
        for column in _annotations():
            batch.add_column(column)
        batch.create_index(batch.f("ix_sweeps_archived"), ["archived"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_index(batch.f("ix_sweeps_archived"))
        for name in ("archived", "notes", "tags"):
            batch.drop_column(name)
    with op.batch_alter_table("runs") as batch:
        batch.drop_index(batch.f("ix_runs_archived"))
        for name in ("archived", "notes", "tags", "name"):
            batch.drop_column(name)

"""store how a run's records spread over users, and what its privacy result warns of

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("users", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("warning", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("warning")
        batch.drop_column("users")

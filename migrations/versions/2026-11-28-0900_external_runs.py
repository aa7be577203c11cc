"""external runs: a run's source (`native`, run by our workers, or `external`, executed elsewhere
and logged through the ingestion API) and the ε its own tool reported (null: none reported)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("source", sa.String(16), nullable=False, server_default="native"))
        batch.add_column(sa.Column("reported_epsilon", sa.Float(), nullable=True))
        batch.create_index("ix_runs_source", ["source"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_source")
        batch.drop_column("reported_epsilon")
        batch.drop_column("source")

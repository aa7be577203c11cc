"""round_metrics.balanced_accuracy: each evaluation's mean per-class recall beside its accuracy

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30 09:00:00

A test metric, withheld where accuracy is; None for rounds evaluated before it was recorded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("round_metrics") as batch:
        batch.add_column(sa.Column("balanced_accuracy", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("round_metrics") as batch:
        batch.drop_column("balanced_accuracy")

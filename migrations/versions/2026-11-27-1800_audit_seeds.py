"""audit seeds and black-box trials: an audit's trials over several seeds, and the runs per side
of its black-box trials (0: none, as every audit stored before them)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("seeds", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("black_box_trials", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("black_box_trials")
        batch.drop_column("seeds")

"""budget units: the records a budget covers (content digests), its δ, notion and neighbouring
relation, and whether its test split is public; a protected round's test metrics may be withheld

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(sa.Column("digests", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("delta", sa.Float(), nullable=False, server_default="1e-05"))
        batch.add_column(sa.Column("notion", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("neighbouring", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("public_test", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("round_metrics") as batch:
        batch.alter_column("accuracy", existing_type=sa.Float(), nullable=True)
        batch.alter_column("loss", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("round_metrics") as batch:
        batch.alter_column("loss", existing_type=sa.Float(), nullable=False)
        batch.alter_column("accuracy", existing_type=sa.Float(), nullable=False)
    with op.batch_alter_table("budgets") as batch:
        batch.drop_column("public_test")
        batch.drop_column("neighbouring")
        batch.drop_column("notion")
        batch.drop_column("delta")
        batch.drop_column("digests")

"""tool_call.confidence: the primary answer's confidence ("high" | "low"; NULL without a primary), so the
console can filter on it and count low-confidence answers in SQL

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_call") as batch:
        batch.add_column(sa.Column("confidence", sa.String(8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_call") as batch:
        batch.drop_column("confidence")

"""tool_call_dropped: how many tool calls the call log could not store, and why (never dropped silently)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "tool_call_dropped",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("dropped", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(255), nullable=False),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )
    op.create_index("ix_tool_call_dropped_created_at", "tool_call_dropped", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_tool_call_dropped_created_at", table_name="tool_call_dropped")
    op.drop_table("tool_call_dropped")

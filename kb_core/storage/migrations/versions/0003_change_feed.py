"""change feed: kb_change, one row per committed write, so every process can follow the others' writes

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "kb_change",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("file_path", sa.String(512), nullable=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sqlite_autoincrement=True,
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("kb_change")

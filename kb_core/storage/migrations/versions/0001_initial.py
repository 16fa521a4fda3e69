"""api_document and tool_call

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_long_text = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "api_document",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("file_name", sa.String(255), nullable=False),
        sa.Column("category", sa.String(64), nullable=False),
        sa.Column("file_path", sa.String(512), nullable=False),
        sa.Column(
            "status",
            sa.Enum("PENDING", "INDEXED", "FAILED", name="documentstatus", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("metadata", _long_text, nullable=True),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("embedding_model", sa.String(255), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("file_path", name="uq_api_document_file_path"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index("ix_api_document_category", "api_document", ["category"])
    op.create_table(
        "tool_call",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("tool_name", sa.String(64), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("found", sa.Boolean(), nullable=False),
        sa.Column("match_types", sa.String(64), nullable=False),
        sa.Column("sources", sa.Text(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("request_id", sa.String(16), nullable=True),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
    )
    op.create_index("ix_tool_call_created_at", "tool_call", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_tool_call_created_at", table_name="tool_call")
    op.drop_table("tool_call")
    op.drop_index("ix_api_document_category", table_name="api_document")
    op.drop_table("api_document")

"""intent record: api_document.pending_operation / pending_owner; SQLite ids never reused

A write commits its row as PENDING (with the operation and the writing process) before it touches disk or
Milvus, and marks it INDEXED last, so opening the knowledge base after a crash knows what was in flight.
SQLite re-issues the largest rolled-back or deleted rowid unless the table is AUTOINCREMENT: a new document
could inherit the vectors of a killed one. SQLite cannot alter that in place, so the table is rebuilt.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    with op.batch_alter_table("api_document", recreate="always" if sqlite else "auto",
                              table_kwargs={"sqlite_autoincrement": True} if sqlite else {}) as batch:
        batch.add_column(sa.Column("pending_operation", sa.String(16), nullable=True))
        batch.add_column(sa.Column("pending_owner", sa.String(255), nullable=True))
    op.create_index("ix_api_document_status", "api_document", ["status"])
    if sqlite:
        with op.batch_alter_table("tool_call", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    op.drop_index("ix_api_document_status", "api_document")
    with op.batch_alter_table("api_document") as batch:
        batch.drop_column("pending_owner")
        batch.drop_column("pending_operation")

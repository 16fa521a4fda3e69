"""api_document.content_version: what cleaning and chunking made a document's chunks (NULL: before the number)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_document") as batch:
        batch.add_column(sa.Column("content_version", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_document") as batch:
        batch.drop_column("content_version")

"""api_document.category holds a folder path at any depth (`apisix/docs/en/latest/plugins`): up to 255
characters (`documents.path_rule.MAX_CATEGORY_CHARS`)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _resize(old: int, new: int) -> None:
    # SQLite does not enforce VARCHAR lengths, and a batch rebuild of the table would drop its AUTOINCREMENT
    # (ids must never be reused: a new document must not inherit a killed one's vectors)
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("api_document", "category", existing_type=sa.String(old), type_=sa.String(new),
                        existing_nullable=False)


def upgrade() -> None:
    _resize(64, 255)


def downgrade() -> None:
    _resize(255, 64)

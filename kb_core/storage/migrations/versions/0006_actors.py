"""Who did what: api_document.changed_by (the last change's actor) and kb_change.actor (each change's), a
console user's e-mail address or a service identity ("agent", "cli", "mcp", "watcher"); NULL for rows
written before

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_document") as batch:
        batch.add_column(sa.Column("changed_by", sa.String(255), nullable=True))
    with op.batch_alter_table("kb_change") as batch:
        batch.add_column(sa.Column("actor", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("kb_change") as batch:
        batch.drop_column("actor")
    with op.batch_alter_table("api_document") as batch:
        batch.drop_column("changed_by")

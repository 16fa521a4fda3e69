"""eval_query, eval_run, eval_outcome: labelled query sets and evaluation runs in the console

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_long_text = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
_table = {"sqlite_autoincrement": True, "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_unicode_ci"}


def upgrade() -> None:
    op.create_table(
        "eval_query",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("set_name", sa.String(255), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("query_hash", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("expected", sa.Text(), nullable=False),
        sa.UniqueConstraint("set_name", "query_hash", name="uq_eval_query_set_query"),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        **_table,
    )
    op.create_index("ix_eval_query_set", "eval_query", ["set_name", "id"])
    op.create_table(
        "eval_run",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("set_name", sa.String(255), nullable=False),
        sa.Column("job_id", _id, nullable=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("metrics", _long_text, nullable=False),
        sa.Column("queries", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        **_table,
    )
    op.create_table(
        "eval_outcome",
        sa.Column("id", _id, primary_key=True, autoincrement=True),
        sa.Column("run_id", _id, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("expected", sa.Text(), nullable=False),
        sa.Column("found", sa.Boolean(), nullable=False),
        sa.Column("primary_source", sa.Text(), nullable=True),
        sa.Column("confidence", sa.String(16), nullable=True),
        sa.Column("supplement", sa.Text(), nullable=True),
        sa.Column("named", sa.Text(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("in_query_language", sa.Boolean(), nullable=True),
        **_table,
    )
    op.create_index("ix_eval_outcome_run", "eval_outcome", ["run_id", "position"])


def downgrade() -> None:
    op.drop_index("ix_eval_outcome_run", table_name="eval_outcome")
    op.drop_table("eval_outcome")
    op.drop_table("eval_run")
    op.drop_index("ix_eval_query_set", table_name="eval_query")
    op.drop_table("eval_query")

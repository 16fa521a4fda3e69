"""SQLAlchemy 2 table definitions: `api_document`, `tool_call`, `kb_change` and `kb_job`. Alembic migrations mirror
these."""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from sqlalchemy import BigInteger, Boolean, DateTime, Enum, Float, Index, Integer, String, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# MySQL TEXT holds 64 KB; the frontmatter block alone may be 64 KiB, so MySQL gets MEDIUMTEXT.
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
# SQLite only auto-increments INTEGER PRIMARY KEY.
Id = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Naive UTC: MySQL and SQLite drop offsets, so every stored time is UTC by convention."""
    return datetime.now(UTC).replace(tzinfo=None)


class DocumentStatus(enum.StrEnum):
    PENDING = "PENDING"
    INDEXED = "INDEXED"
    FAILED = "FAILED"


class Base(DeclarativeBase):
    pass


class ApiDocument(Base):
    __tablename__ = "api_document"
    __table_args__ = (Index("ix_api_document_status", "status"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    file_name: Mapped[str] = mapped_column(String(255))
    category: Mapped[str] = mapped_column(String(255), index=True)  # a folder path (MAX_CATEGORY_CHARS)
    file_path: Mapped[str] = mapped_column(String(512), unique=True)
    status: Mapped[DocumentStatus] = mapped_column(
        Enum(DocumentStatus, native_enum=False, length=16, validate_strings=True), default=DocumentStatus.PENDING
    )
    # `metadata` is reserved on declarative classes; the column keeps the spec's name.
    metadata_json: Mapped[str | None] = mapped_column("metadata", LongText, nullable=True)
    content_sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(Integer)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    embedding_model: Mapped[str | None] = mapped_column(String(255), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)
    # The intent record: while status is PENDING, what is in flight ("upload" | "delete") and who writes it
    # ("host:pid:start"), so opening the knowledge base after a crash can finish or undo it.
    pending_operation: Mapped[str | None] = mapped_column(String(16), nullable=True)
    pending_owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # who made the last change: a console user's e-mail, or a service identity ("agent", "cli", "mcp", "watcher")
    changed_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # what cleaning and chunking made its chunks (`chunking.CONTENT_VERSION`); NULL: before the number existed
    content_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class ToolCall(Base):
    __tablename__ = "tool_call"
    __table_args__ = (Index("ix_tool_call_created_at", "created_at"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    tool_name: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[str] = mapped_column(Text)
    found: Mapped[bool] = mapped_column(Boolean, default=False)
    match_types: Mapped[str] = mapped_column(String(64), default="")
    sources: Mapped[str] = mapped_column(Text, default="[]")
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    request_id: Mapped[str | None] = mapped_column(String(16), nullable=True)
    caller: Mapped[str] = mapped_column(String(64), default="python")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    confidence: Mapped[str | None] = mapped_column(String(8), nullable=True)  # of the primary; NULL without one


class ToolCallDropped(Base):
    """Tool calls that were not logged: the call log's writer stores how many (and why) instead of dropping them
    silently, so the Tool calls page can say its counts are short."""

    __tablename__ = "tool_call_dropped"
    __table_args__ = (Index("ix_tool_call_dropped_created_at", "created_at"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)  # when the count was stored
    dropped: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(255), default="")


class Change(Base):
    """The change feed: one row per committed write, in the write's own transaction. Every process follows it
    to keep its in-memory L0 index in step with the others' writes."""

    __tablename__ = "kb_change"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    file_path: Mapped[str] = mapped_column(String(512))
    operation: Mapped[str] = mapped_column(String(16))  # "upsert" | "delete"
    content_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str | None] = mapped_column(String(255), nullable=True)  # who made the change


class Job(Base):
    """A job: reconcile, re-index all, a batch upload or a folder import run by a knowledge base's worker thread
    (`kb_core.jobs`). The row is the truth every process and tab reads: state, progress, who, which process runs
    it (so a process that died is recognised), and how it ended."""

    __tablename__ = "kb_job"
    __table_args__ = (Index("ix_kb_job_state", "state"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))  # "reconcile" | "reindex_all" | "upload" | "import"
    state: Mapped[str] = mapped_column(String(16))  # "queued" | "running" | "succeeded" | "failed" | "cancelled"
    actor: Mapped[str] = mapped_column(String(255))  # who started it (a user's e-mail or a service identity)
    actor_role: Mapped[str] = mapped_column(String(16))
    # the process that runs it: host, pid and a start marker of that process (a recycled pid is another process)
    owner_host: Mapped[str] = mapped_column(String(255))
    owner_pid: Mapped[int] = mapped_column(Integer)
    owner_start: Mapped[str] = mapped_column(String(64))
    params: Mapped[str] = mapped_column(LongText, default="{}")  # JSON: what the job was asked to do
    stage: Mapped[str] = mapped_column(String(255), default="")  # what it is doing now (a stage, a file name)
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    counts: Mapped[str] = mapped_column(Text, default="{}")  # JSON: outcome -> number of documents
    errors: Mapped[str] = mapped_column(Text, default="[]")  # JSON: the first errors (bounded)
    error_count: Mapped[int] = mapped_column(Integer, default=0)  # all errors, also those not kept
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)  # one line: how it ended
    result: Mapped[str | None] = mapped_column(LongText, nullable=True)  # JSON: per-file outcomes, lists (bounded)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)  # the last progress (a heartbeat)

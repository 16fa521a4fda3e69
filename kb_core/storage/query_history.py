"""The playground's query history: each console user's test runs (query, section, options, outcome), newest first.

One row per run in `query_history` (migration 0009), keyed by the acting user (`Actor.name`: an e-mail address
when sign-in is configured, else `console`), so two users never see each other's. The newest `KEEP` runs of each
user are kept; older ones are deleted as new ones come in. `QueryHistoryQueries` is mixed into `MetadataStore`,
which provides `_read` and `_write`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, Index, String, Text, delete, select
from sqlalchemy.orm import Mapped, mapped_column

from kb_core.storage.db_models import Base, Id, utcnow

KEEP = 1000  # runs kept per user
_MAX_TEXT_CHARS = 16000


class QueryHistory(Base):
    __tablename__ = "query_history"
    __table_args__ = (Index("ix_query_history_actor_id", "actor", "id"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    actor: Mapped[str] = mapped_column(String(255))  # whose history
    query: Mapped[str] = mapped_column(Text)
    section_title: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[str] = mapped_column(Text, default="{}")  # the test bench's options, JSON
    found: Mapped[bool] = mapped_column(Boolean, default=False)
    answer: Mapped[str] = mapped_column(String(64), default="")  # "exact_L0 + semantic_L1", "error", ...
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


@dataclass(frozen=True)
class QueryHistoryRecord:
    id: int
    actor: str
    query: str
    section_title: str | None
    options: dict[str, Any]  # as stored: the caller turns it back into its options
    found: bool
    answer: str
    latency_ms: float
    created_at: datetime  # UTC


def _options(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class QueryHistoryQueries:
    """Mixed into `MetadataStore`."""

    def record_query(self, *, actor: str, query: str, section_title: str | None, options: dict[str, Any],
                     found: bool, answer: str, latency_ms: float) -> int:
        """Add a run to `actor`'s history (and drop their runs beyond the newest `KEEP`); its id."""
        actor = actor[:255]
        with self._write("record the query in the history") as session:  # type: ignore[attr-defined]
            row = QueryHistory(actor=actor, query=query[:_MAX_TEXT_CHARS],
                               section_title=section_title[:_MAX_TEXT_CHARS] if section_title else None,
                               options=json.dumps(options, ensure_ascii=False)[:_MAX_TEXT_CHARS], found=bool(found),
                               answer=answer[:64], latency_ms=float(latency_ms), created_at=utcnow())
            session.add(row)
            session.flush()
            oldest_kept = session.scalar(select(QueryHistory.id).where(QueryHistory.actor == actor)
                                         .order_by(QueryHistory.id.desc()).offset(KEEP - 1).limit(1))
            if oldest_kept is not None:
                session.execute(delete(QueryHistory).where(QueryHistory.actor == actor,
                                                           QueryHistory.id < oldest_kept))
            return row.id

    def query_history(self, actor: str, limit: int = 20) -> list[QueryHistoryRecord]:
        """`actor`'s runs, newest first."""
        query = (select(QueryHistory).where(QueryHistory.actor == actor[:255]).order_by(QueryHistory.id.desc())
                 .limit(max(0, int(limit))))
        with self._read() as session:  # type: ignore[attr-defined]
            return [QueryHistoryRecord(id=r.id, actor=r.actor, query=r.query, section_title=r.section_title,
                                       options=_options(r.options), found=bool(r.found), answer=r.answer or "",
                                       latency_ms=float(r.latency_ms or 0.0),
                                       created_at=r.created_at.replace(tzinfo=UTC))
                    for r in session.scalars(query)]

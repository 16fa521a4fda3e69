"""Summaries of the `tool_call` table computed by the database: the console charts them and lists what needs
attention without loading every call into the page.

Buckets are UTC hours or days, formatted by the database itself (each dialect has its own date function).
Percentiles are nearest-rank, computed with window functions (SQLite >= 3.25, MariaDB >= 10.2, MySQL 8),
the same definition as `kb_core.ops.stats.percentile`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from kb_core.storage.db_models import ToolCall

Bucket = Literal["hour", "day"]

# Only lookups are judged (found rate, needs attention): `read_document` serves the document an agent named.
LOOKUP_TOOL = "lookup_knowledge"
# A lookup the console ran again (a link from Tool calls or a shared test, the playground's history): logged and
# listed, but not a new question, so never counted as needing attention.
REPLAY_CALLER = "console-replay"

_FORMATS = {  # (hour, day) per dialect; every one yields "YYYY-MM-DD HH:00:00"
    "sqlite": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
    "mysql": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
    "mariadb": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
}


@dataclass(frozen=True)
class CallBucket:
    """The calls of one hour or day (UTC)."""

    start: datetime
    calls: int  # every tool call (lookups and reads)
    found: int  # lookups that found something
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    lookups: int | None = None  # `lookup_knowledge` calls (None: as many as `calls`)

    @property
    def found_rate(self) -> float | None:
        """Found among lookups (a `read_document` call is not a search)."""
        judged = self.calls if self.lookups is None else self.lookups
        return self.found / judged if judged else None


def _naive_utc(value: datetime) -> datetime:
    """Stored times are naive UTC (see `db_models.utcnow`)."""
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def needs_attention_clause() -> ColumnElement[bool]:
    """Lookups answered without error, but not found, found through L1 only, or with a low-confidence primary;
    not the console's replays (`REPLAY_CALLER`)."""
    return and_(ToolCall.tool_name == LOOKUP_TOOL, ToolCall.error.is_(None), ToolCall.caller != REPLAY_CALLER,
                or_(ToolCall.found.is_(False), ToolCall.match_types.not_like("%exact_L0%"),
                    ToolCall.confidence == "low"))


class ToolCallQueries:
    """Mixed into `MetadataStore` (which provides `backend`, `url` and `_read`)."""

    backend: str
    url: str

    def _bucket_expression(self, bucket: Bucket) -> Any:
        fmt = _FORMATS[self.backend][0 if bucket == "hour" else 1]
        if self.backend == "sqlite":
            return func.strftime(fmt, ToolCall.created_at)
        return func.date_format(ToolCall.created_at, fmt)

    def tool_call_buckets(self, since: datetime, bucket: Bucket = "hour") -> list[CallBucket]:
        """Calls, found and errors per hour or day since `since`, with p50 and p95 latency, oldest first."""
        slot = self._bucket_expression(bucket).label("slot")
        ranked = (
            select(
                slot,
                ToolCall.found.label("found"),
                (ToolCall.tool_name == LOOKUP_TOOL).label("lookup"),
                ToolCall.error.label("error"),
                ToolCall.latency_ms.label("latency"),
                func.row_number().over(partition_by=slot, order_by=ToolCall.latency_ms).label("rn"),
                func.count().over(partition_by=slot).label("n"),
            )
            .where(ToolCall.created_at >= _naive_utc(since))
            .subquery()
        )

        def nearest_rank(p: int) -> Any:
            # the smallest latency whose rank r has r >= p% of n, in integers: r * 100 >= p * n
            return func.min(case((ranked.c.rn * 100 >= ranked.c.n * p, ranked.c.latency)))

        query = (
            select(
                ranked.c.slot,
                func.count(),
                func.sum(case((and_(ranked.c.found.is_(True), ranked.c.lookup.is_(True)), 1), else_=0)),
                func.sum(case((ranked.c.error.is_not(None), 1), else_=0)),
                nearest_rank(50),
                nearest_rank(95),
                func.sum(case((ranked.c.lookup.is_(True), 1), else_=0)),
            )
            .group_by(ranked.c.slot)
            .order_by(ranked.c.slot)
        )
        with self._read() as session:  # type: ignore[attr-defined]
            rows = session.execute(query).all()
        return [
            CallBucket(
                start=datetime.strptime(str(slot), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC),
                calls=int(calls),
                found=int(found or 0),
                errors=int(errors or 0),
                p50_ms=None if p50 is None else float(p50),
                p95_ms=None if p95 is None else float(p95),
                lookups=int(lookups or 0),
            )
            for slot, calls, found, errors, p50, p95, lookups in rows
        ]

    def tool_calls_needing_attention(self, since: datetime, limit: int = 5000) -> list[ToolCallRecord]:
        """The calls since `since` that need a curator (`needs_attention_clause`), newest first."""
        query = (select(ToolCall).where(ToolCall.created_at >= _naive_utc(since), needs_attention_clause())
                 .order_by(ToolCall.id.desc()).limit(limit))
        with self._read() as session:  # type: ignore[attr-defined]
            return [tool_call_record(r) for r in session.scalars(query)]


@dataclass(frozen=True)
class ToolCallRecord:
    id: int
    tool_name: str
    arguments: dict[str, Any]
    found: bool
    match_types: tuple[str, ...]
    sources: tuple[str, ...]
    latency_ms: float
    request_id: str | None
    caller: str
    error: str | None
    created_at: datetime
    confidence: str | None = None  # the primary's: "high" | "low"; None without a primary (or logged before 0004)


def tool_call_record(r: ToolCall) -> ToolCallRecord:
    return ToolCallRecord(
        id=r.id,
        tool_name=r.tool_name,
        arguments=json.loads(r.arguments or "{}"),
        found=bool(r.found),
        match_types=tuple(t for t in (r.match_types or "").split(",") if t),
        sources=tuple(json.loads(r.sources or "[]")),
        latency_ms=r.latency_ms,
        request_id=r.request_id,
        caller=r.caller,
        error=r.error,
        created_at=r.created_at.replace(tzinfo=UTC),
        confidence=r.confidence,
    )


__all__ = ["Bucket", "CallBucket", "ToolCallQueries", "ToolCallRecord", "needs_attention_clause", "tool_call_record"]

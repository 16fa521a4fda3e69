"""Summaries of the `tool_call` table computed by the database: the console charts them and lists what needs
attention without loading every call into the page.

Buckets are UTC hours or days, formatted by the database itself (each dialect has its own date function).
Percentiles are nearest-rank, computed with window functions (SQLite >= 3.25, MariaDB >= 10.2, MySQL 8,
PostgreSQL), the same definition as `kb_core.stats.percentile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from kb_core.errors import MetadataStoreError
from kb_core.storage.db_models import ToolCall

Bucket = Literal["hour", "day"]

_FORMATS = {  # (hour, day) per dialect; every one yields "YYYY-MM-DD HH:00:00"
    "sqlite": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
    "mysql": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
    "mariadb": ("%Y-%m-%d %H:00:00", "%Y-%m-%d 00:00:00"),
    "postgresql": ("YYYY-MM-DD HH24:00:00", "YYYY-MM-DD 00:00:00"),
}


@dataclass(frozen=True)
class CallBucket:
    """The calls of one hour or day (UTC)."""

    start: datetime
    calls: int
    found: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None

    @property
    def found_rate(self) -> float | None:
        return self.found / self.calls if self.calls else None


def _naive_utc(value: datetime) -> datetime:
    """Stored times are naive UTC (see `db_models.utcnow`)."""
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def needs_attention_clause() -> ColumnElement[bool]:
    """Answered without error, but not found, found through L1 only, or with a low-confidence primary."""
    return and_(ToolCall.error.is_(None),
                or_(ToolCall.found.is_(False), ToolCall.match_types.not_like("%exact_L0%"),
                    ToolCall.confidence == "low"))


class ToolCallQueries:
    """Mixed into `MetadataStore` (which provides `backend`, `url` and `_read`)."""

    backend: str
    url: str

    def _bucket_expression(self, bucket: Bucket) -> Any:
        formats = _FORMATS.get(self.backend)
        if formats is None:
            raise MetadataStoreError(f"tool-call charts are not supported on {self.backend}")
        fmt = formats[0 if bucket == "hour" else 1]
        if self.backend == "sqlite":
            return func.strftime(fmt, ToolCall.created_at)
        if self.backend == "postgresql":
            return func.to_char(ToolCall.created_at, fmt)
        return func.date_format(ToolCall.created_at, fmt)

    def tool_call_buckets(self, since: datetime, bucket: Bucket = "hour") -> list[CallBucket]:
        """Calls, found and errors per hour or day since `since`, with p50 and p95 latency, oldest first."""
        slot = self._bucket_expression(bucket).label("slot")
        ranked = (
            select(
                slot,
                ToolCall.found.label("found"),
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
                func.sum(case((ranked.c.found.is_(True), 1), else_=0)),
                func.sum(case((ranked.c.error.is_not(None), 1), else_=0)),
                nearest_rank(50),
                nearest_rank(95),
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
            )
            for slot, calls, found, errors, p50, p95 in rows
        ]

    def tool_calls_needing_attention(self, since: datetime, limit: int = 5000) -> list[Any]:
        """The calls since `since` that need a curator (`needs_attention_clause`), newest first."""
        from kb_core.storage.metadata_store import tool_call_record

        query = (select(ToolCall).where(ToolCall.created_at >= _naive_utc(since), needs_attention_clause())
                 .order_by(ToolCall.id.desc()).limit(limit))
        with self._read() as session:  # type: ignore[attr-defined]
            return [tool_call_record(r) for r in session.scalars(query)]


__all__ = ["Bucket", "CallBucket", "ToolCallQueries", "needs_attention_clause"]

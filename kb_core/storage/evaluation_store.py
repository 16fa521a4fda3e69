"""Evaluation in the console: labelled query sets and the runs scored on them (migration 0010).

- `eval_query`: one labelled query of a named set (`set_name`, `query`, `kind`, `expected` as a JSON list of
  `category/file.md` paths; `[]` = the knowledge base has no answer). A query is in a set once (a unique key on
  the set and the query's sha256): labelling it again (or importing it again) replaces its label.
- `eval_run`: one evaluation run (an `evaluate` job): the set, who, when, the settings it ran with (L0 rule,
  L1 mode, model) and the report's metrics per kind (`kb_core.evaluation.scoring.KindReport` as a dict), JSON.
- `eval_outcome`: each query's answer in a run (found, primary, confidence, supplement, the other documents
  named, latency, in the query's language).

`EvaluationQueries` is mixed into `MetadataStore`, which provides `_read` and `_write`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, Index, Integer, String, Text, UniqueConstraint, delete, func, select
from sqlalchemy.orm import Mapped, mapped_column

from kb_core.storage.db_models import Base, Id, LongText, utcnow


class EvalQuery(Base):
    __tablename__ = "eval_query"
    __table_args__ = (Index("ix_eval_query_set", "set_name", "id"),
                      UniqueConstraint("set_name", "query_hash", name="uq_eval_query_set_query"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    set_name: Mapped[str] = mapped_column(String(255))
    query: Mapped[str] = mapped_column(Text)
    query_hash: Mapped[str] = mapped_column(String(64))  # sha256 of the query: a query is in a set once
    kind: Mapped[str] = mapped_column(String(64))
    expected: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of relative paths
    actor: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class EvalRun(Base):
    __tablename__ = "eval_run"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    set_name: Mapped[str] = mapped_column(String(255))
    job_id: Mapped[int | None] = mapped_column(Id, nullable=True)
    actor: Mapped[str] = mapped_column(String(255), default="")
    settings: Mapped[str] = mapped_column(Text, default="{}")  # JSON: l0_matching, l1_mode, model
    metrics: Mapped[str] = mapped_column(LongText, default="{}")  # JSON: {"kinds": [...], "overall": {...}}
    queries: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class EvalOutcome(Base):
    __tablename__ = "eval_outcome"
    __table_args__ = (Index("ix_eval_outcome_run", "run_id", "position"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(Id)
    position: Mapped[int] = mapped_column(Integer)
    query: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(64))
    expected: Mapped[str] = mapped_column(Text, default="[]")
    found: Mapped[bool] = mapped_column(Boolean, default=False)
    primary_source: Mapped[str | None] = mapped_column(Text, nullable=True)
    confidence: Mapped[str | None] = mapped_column(String(16), nullable=True)
    supplement: Mapped[str | None] = mapped_column(Text, nullable=True)
    named: Mapped[str] = mapped_column(Text, default="[]")
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    in_query_language: Mapped[bool | None] = mapped_column(Boolean, nullable=True)


@dataclass(frozen=True)
class QuerySetInfo:
    name: str
    queries: int
    updated_at: datetime  # UTC: when a query of it was last labelled or imported


@dataclass(frozen=True)
class StoredQuery:
    query: str
    kind: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class StoredOutcome:
    query: str
    kind: str
    expected: tuple[str, ...]
    found: bool
    primary: str | None
    confidence: str | None
    supplement: str | None
    named: tuple[str, ...]
    latency_ms: float
    in_query_language: bool | None


@dataclass(frozen=True)
class StoredRun:
    id: int
    set_name: str
    job_id: int | None
    actor: str
    settings: dict[str, Any]
    metrics: dict[str, Any]
    queries: int
    created_at: datetime  # UTC
    outcomes: tuple[StoredOutcome, ...] = ()  # only from `evaluation_run(id)`


def _json(text: str | None, default: Any) -> Any:
    try:
        value = json.loads(text or "null")
    except ValueError:
        return default
    return value if isinstance(value, type(default)) else default


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class EvaluationQueries:
    """Mixed into `MetadataStore`."""

    def put_labelled_queries(self, set_name: str, queries: Sequence[StoredQuery], actor: str) -> int:
        """Add each query to `set_name` (created by its first query), replacing the label of a query already in
        it; all or nothing. How many were added or replaced."""
        with self._write("store the labelled queries") as session:  # type: ignore[attr-defined]
            existing = {r.query_hash: r for r in
                        session.scalars(select(EvalQuery).where(EvalQuery.set_name == set_name))}
            for q in queries:
                digest = query_hash(q.query)
                row = existing.get(digest)
                if row is None:
                    row = EvalQuery(set_name=set_name, query=q.query, query_hash=digest)
                    session.add(row)
                    existing[digest] = row
                row.kind, row.expected = q.kind[:64], _dump(list(q.expected))
                row.actor, row.created_at = actor[:255], utcnow()
            return len(queries)

    def delete_labelled_query(self, set_name: str, query: str) -> bool:
        with self._write("remove the labelled query") as session:  # type: ignore[attr-defined]
            result = session.execute(delete(EvalQuery).where(EvalQuery.set_name == set_name,
                                                             EvalQuery.query_hash == query_hash(query)))
            return bool(result.rowcount)

    def query_sets(self) -> list[QuerySetInfo]:
        stmt = (select(EvalQuery.set_name, func.count(), func.max(EvalQuery.created_at))
                .group_by(EvalQuery.set_name).order_by(EvalQuery.set_name))
        with self._read() as session:  # type: ignore[attr-defined]
            return [QuerySetInfo(name, int(n), last.replace(tzinfo=UTC)) for name, n, last in session.execute(stmt)]

    def labelled_queries(self, set_name: str) -> list[StoredQuery]:
        """The set's queries in the order they were first added."""
        stmt = select(EvalQuery).where(EvalQuery.set_name == set_name).order_by(EvalQuery.id)
        with self._read() as session:  # type: ignore[attr-defined]
            return [StoredQuery(r.query, r.kind, tuple(_json(r.expected, []))) for r in session.scalars(stmt)]

    def store_evaluation_run(self, *, set_name: str, job_id: int | None, actor: str, settings: dict[str, Any],
                             metrics: dict[str, Any], outcomes: Sequence[StoredOutcome]) -> int:
        with self._write("store the evaluation run") as session:  # type: ignore[attr-defined]
            run = EvalRun(set_name=set_name[:255], job_id=job_id, actor=actor[:255], settings=_dump(settings),
                          metrics=_dump(metrics), queries=len(outcomes), created_at=utcnow())
            session.add(run)
            session.flush()
            session.add_all(EvalOutcome(
                run_id=run.id, position=i, query=o.query, kind=o.kind[:64], expected=_dump(list(o.expected)),
                found=o.found, primary_source=o.primary, confidence=o.confidence, supplement=o.supplement,
                named=_dump(list(o.named)), latency_ms=float(o.latency_ms), in_query_language=o.in_query_language)
                for i, o in enumerate(outcomes))
            return run.id

    def evaluation_runs(self, limit: int = 100) -> list[StoredRun]:
        """The newest runs first, without their outcomes."""
        stmt = select(EvalRun).order_by(EvalRun.id.desc()).limit(max(0, int(limit)))
        with self._read() as session:  # type: ignore[attr-defined]
            return [_run(r) for r in session.scalars(stmt)]

    def evaluation_run(self, run_id: int) -> StoredRun | None:
        with self._read() as session:  # type: ignore[attr-defined]
            row = session.get(EvalRun, run_id)
            if row is None:
                return None
            stmt = select(EvalOutcome).where(EvalOutcome.run_id == run_id).order_by(EvalOutcome.position)
            outcomes = tuple(StoredOutcome(
                query=o.query, kind=o.kind, expected=tuple(_json(o.expected, [])), found=bool(o.found),
                primary=o.primary_source, confidence=o.confidence, supplement=o.supplement,
                named=tuple(_json(o.named, [])), latency_ms=float(o.latency_ms or 0.0),
                in_query_language=o.in_query_language) for o in session.scalars(stmt))
            return _run(row, outcomes)


def _run(row: EvalRun, outcomes: tuple[StoredOutcome, ...] = ()) -> StoredRun:
    return StoredRun(id=row.id, set_name=row.set_name, job_id=row.job_id, actor=row.actor,
                     settings=_json(row.settings, {}), metrics=_json(row.metrics, {}), queries=int(row.queries or 0),
                     created_at=row.created_at.replace(tzinfo=UTC), outcomes=outcomes)

"""The `kb_job` table: every state change of a job is one short transaction, conditional on the state it
changes from, so a cancel, the worker and another process's sweep can never overwrite each other."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import defer

from kb_core.access import Actor
from kb_core.jobs.model import MAX_ERROR_CHARS, MAX_ERRORS, JobRecord, JobState
from kb_core.jobs.process import ProcessIdentity
from kb_core.storage.db_models import Job, ToolCall, utcnow
from kb_core.storage.metadata_store import MetadataStore

_ACTIVE = (JobState.QUEUED.value, JobState.RUNNING.value)
_TEXT_CHARS = 12_000  # a TEXT column holds 64 KB on MySQL, 4 bytes a character at worst
_SUMMARY_CHARS = 4_000


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def _errors_text(errors: Sequence[str]) -> str:
    """The first errors, each cut, as JSON that fits a TEXT column."""
    kept = [e if len(e) <= MAX_ERROR_CHARS else e[:MAX_ERROR_CHARS - 1] + "…" for e in list(errors)[:MAX_ERRORS]]
    text = json.dumps(kept, ensure_ascii=False)
    while kept and len(text) > _TEXT_CHARS:
        kept.pop()
        text = json.dumps(kept, ensure_ascii=False)
    return text


def _record(row: Job, *, details: bool = True) -> JobRecord:
    """The row as a value; without `details`, its parameters and result (large for a big import) are left out."""
    return JobRecord(
        id=row.id, kind=row.kind, state=JobState(row.state), actor=row.actor, actor_role=row.actor_role,
        owner=ProcessIdentity(row.owner_host, row.owner_pid, row.owner_start),
        params=_loads(row.params, {}) if details else {},
        stage=row.stage or "", done=row.done or 0, total=row.total or 0, counts=_loads(row.counts, {}),
        errors=tuple(_loads(row.errors, [])), error_count=row.error_count or 0, summary=row.summary,
        result=_loads(row.result, None) if details else None, cancel_requested=bool(row.cancel_requested),
        created_at=_aware(row.created_at), started_at=_aware(row.started_at), ended_at=_aware(row.ended_at),
        updated_at=_aware(row.updated_at))


class JobStore:
    def __init__(self, metadata: MetadataStore):
        self._metadata = metadata

    def create(self, kind: str, actor: Actor, owner: ProcessIdentity, params: Mapping[str, Any],
               total: int = 0) -> JobRecord:
        now = utcnow()
        with self._metadata.session("record the job") as session:
            row = Job(kind=kind, state=JobState.QUEUED.value, actor=actor.name[:255], actor_role=actor.role.label,
                      owner_host=owner.host[:255], owner_pid=owner.pid, owner_start=owner.start[:64],
                      params=json.dumps(dict(params), ensure_ascii=False), stage="", done=0, total=total,
                      counts="{}", errors="[]", error_count=0, cancel_requested=False, created_at=now,
                      updated_at=now)
            session.add(row)
            session.flush()
            return _record(row)

    def get(self, job_id: int) -> JobRecord | None:
        with self._metadata.session() as session:
            row = session.get(Job, job_id)
            return None if row is None else _record(row)

    def recent(self, limit: int = 20, kinds: Sequence[str] | None = None) -> list[JobRecord]:
        """The newest jobs first (of `kinds`, or all), without their parameters and results: a list to show."""
        query = select(Job).options(defer(Job.params), defer(Job.result)).order_by(Job.id.desc()).limit(limit)
        if kinds is not None:
            query = query.where(Job.kind.in_(list(kinds)))
        with self._metadata.session() as session:
            return [_record(r, details=False) for r in session.scalars(query)]

    def active(self) -> list[JobRecord]:
        """Queued and running jobs of every process, oldest first (few: an index on the state finds them)."""
        with self._metadata.session() as session:
            return [_record(r) for r in session.scalars(select(Job).where(Job.state.in_(_ACTIVE)).order_by(Job.id))]

    def claim(self, job_id: int) -> bool:
        """queued -> running, unless it was cancelled (or failed) meanwhile."""
        now = utcnow()
        return self._change(job_id, (JobState.QUEUED,), "start the job", state=JobState.RUNNING.value,
                            started_at=now, updated_at=now, cancel_requested=False)

    def touch(self, job_id: int) -> None:
        """A queued job's sign of life (another host cannot tell whether its process still runs)."""
        self._change(job_id, (JobState.QUEUED,), "record that the job waits", updated_at=utcnow())

    def progress(self, job_id: int, *, stage: str, done: int, total: int, counts: Mapping[str, int],
                 errors: Sequence[str], error_count: int) -> bool:
        """Record the progress of a running job; whether a cancel was requested (by any process)."""
        with self._metadata.session("record the job's progress") as session:
            session.execute(update(Job).where(Job.id == job_id, Job.state == JobState.RUNNING.value).values(
                stage=stage[:255], done=done, total=total, counts=json.dumps(dict(counts)),
                errors=_errors_text(errors), error_count=error_count, updated_at=utcnow()))
            return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))

    def finish(self, job_id: int, state: JobState, *, summary: str, stage: str, done: int, total: int,
               counts: Mapping[str, int], errors: Sequence[str], error_count: int,
               result: Mapping[str, Any] | None) -> bool:
        """How it ended (running or queued -> succeeded, failed or cancelled)."""
        now = utcnow()
        return self._change(job_id, (JobState.QUEUED, JobState.RUNNING), "record how the job ended",
                            state=state.value, summary=summary[:_SUMMARY_CHARS], stage=stage[:255], done=done,
                            total=total, counts=json.dumps(dict(counts)), errors=_errors_text(errors),
                            error_count=error_count, ended_at=now, updated_at=now,
                            result=None if result is None else json.dumps(dict(result), ensure_ascii=False))

    def request_cancel(self, job_id: int) -> JobRecord | None:
        """A queued job is cancelled at once; a running one is asked to stop at its next document."""
        now = utcnow()
        if not self._change(job_id, (JobState.QUEUED,), "cancel the job", state=JobState.CANCELLED.value,
                            summary="cancelled before it started", ended_at=now, updated_at=now):
            self._change(job_id, (JobState.RUNNING,), "cancel the job", cancel_requested=True)
        return self.get(job_id)

    def fail(self, job_id: int, summary: str, *, error: str | None = None) -> bool:
        """A queued or running job that cannot go on (its process died): failed, with why."""
        now = utcnow()
        values: dict[str, Any] = {"state": JobState.FAILED.value, "summary": summary[:_SUMMARY_CHARS],
                                  "ended_at": now, "updated_at": now}
        if error is not None:
            values.update(errors=_errors_text([error]), error_count=Job.error_count + 1)
        return self._change(job_id, (JobState.QUEUED, JobState.RUNNING), "record that the job failed", **values)

    def lookups_since(self, seconds: float) -> bool:
        """Whether any process logged a tool call (an agent's lookup or read) in the last `seconds`."""
        with self._metadata.session() as session:
            return session.scalar(select(ToolCall.id).where(ToolCall.created_at >= self.stale_since(seconds))
                                  .limit(1)) is not None

    def stale_since(self, seconds: float) -> datetime:
        """The naive UTC moment `seconds` ago, as `updated_at` is stored."""
        return utcnow() - timedelta(seconds=seconds)

    def _change(self, job_id: int, states: Sequence[JobState], what: str, **values: Any) -> bool:
        with self._metadata.session(what) as session:
            changed = session.execute(update(Job).where(Job.id == job_id, Job.state.in_([s.value for s in states]))
                                      .values(**values))
            return bool(changed.rowcount)

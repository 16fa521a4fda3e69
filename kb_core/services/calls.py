"""The agents' tools as the facade serves them: a call with raw arguments (`lookup_knowledge` or
`read_document`), timed, logged to the call log and counted in the metrics under its caller; and the call log
read back (recent calls, hourly or daily buckets, the queries that need attention)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kb_core.agent.call_stats import AttentionGroup, Bucket, CallBucket, bucket_for, needs_attention, percentile
from kb_core.agent.tool import (
    READ_TOOL_NAME,
    TOOL_NAME,
    TOOL_NAMES,
    CallRecorder,
    LookupTool,
    ReadDocumentTool,
    ToolResponse,
    error_payload,
)
from kb_core.ops.logs import log_context, new_request_id
from kb_core.retrieval.lookup import LookupResult
from kb_core.retrieval.reading import DocumentReader

if TYPE_CHECKING:
    from kb_core.documents.scope import Scope
    from kb_core.ops.metrics import KnowledgeBaseMetrics
    from kb_core.services.acting import Acting
    from kb_core.services.parts import Parts
    from kb_core.storage.metadata_store import ToolCallRecord

log = logging.getLogger(__name__)

# The calls a limited viewer's chart counts at most (the newest): its buckets are counted here, not in SQL.
SCOPED_CALLS = 50_000


class ToolCalls:
    def __init__(self, parts: Parts, metrics: KnowledgeBaseMetrics):
        self._metadata = parts.metadata
        self._index = parts.index
        self._metrics = metrics
        self.recorder = CallRecorder(parts.metadata)
        self._tools = {TOOL_NAME: LookupTool(parts.lookup, self.recorder),
                       READ_TOOL_NAME: ReadDocumentTool(DocumentReader(parts.index), self.recorder)}

    def call(self, arguments: object, *, caller: str, tool: str, scope: Scope) -> ToolResponse:
        """An unknown `tool` name gives an error result (not logged), as an agent that made one up should read."""
        handler = self._tools.get(tool) if isinstance(tool, str) else None
        if handler is None:
            error = f"unknown tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}"
            return ToolResponse(error_payload(error), None, error, 0.0)
        # the request id every log line of this call carries, and the one the call log and the trace show
        with log_context(request_id=new_request_id(), caller=caller):
            response = handler.call(arguments, caller=caller, scope=scope)
            if isinstance(response.result, LookupResult):
                self._metrics.observe_lookup(response.result)
            self._metrics.observe_tool_call(tool, found=bool(response.payload.get("found")), error=response.error,
                                            caller=caller)
            log.log(logging.INFO if response.error else logging.DEBUG, "%s: %s in %.1f ms", tool,
                    response.error or ("found" if response.payload.get("found") else "not found"),
                    response.latency_ms, extra={"timings_ms": {"total": response.latency_ms}})
        return response

    # -- the call log --------------------------------------------------------------------------------------
    def recent(self, limit: int, scope: Scope) -> list[ToolCallRecord]:
        """Newest first; for a scope limited to some audiences, only calls whose sources it may read (another
        caller's answer names pages)."""
        self.recorder.flush(2)
        calls = self._metadata.recent_tool_calls(limit)
        if scope.everything:
            return calls
        return [c for c in calls if self._shown(c, scope)]

    def _shown(self, call: ToolCallRecord, scope: Scope) -> bool:
        """Whether a caller limited to `scope` may see `call`: every page its answer named is one it may read."""
        return all(self._may_read(s, scope) for s in call.sources)

    def _may_read(self, source: str, scope: Scope) -> bool:
        entry = self._index.get(source)
        return entry is not None and scope.may_read(entry.category, entry.audience)

    def not_logged(self, span: timedelta) -> int:
        self.recorder.flush(2)
        return self._metadata.tool_calls_dropped(_since(span)) + self.recorder.waiting_drops

    def buckets(self, span: timedelta, scope: Scope) -> list[CallBucket]:
        """Per hour or day; for a scope limited to some audiences, of the calls it may see (`recent`'s rule),
        counted here: the database's own buckets would count the others' calls too."""
        self.recorder.flush(2)
        since, bucket = _since(span), bucket_for(span)
        if scope.everything:
            return self._metadata.tool_call_buckets(since, bucket)
        return _buckets([c for c in self._calls_since(since) if self._shown(c, scope)], bucket)

    def _calls_since(self, since: datetime) -> list[ToolCallRecord]:
        """The calls since `since`, newest first, at most `SCOPED_CALLS` (the log has no read by time)."""
        limit = 1000
        while True:
            calls = self._metadata.recent_tool_calls(limit)
            if len(calls) < limit or calls[-1].created_at < since or limit >= SCOPED_CALLS:
                return [c for c in calls if c.created_at >= since]
            limit = min(limit * 4, SCOPED_CALLS)

    def needing_attention(self, span: timedelta, scope: Scope) -> list[AttentionGroup]:
        """Grouped by query; for a scope limited to some audiences, of the calls it may see (`recent`'s rule)."""
        self.recorder.flush(2)
        calls = self._metadata.tool_calls_needing_attention(_since(span))
        return needs_attention(calls if scope.everything else [c for c in calls if self._shown(c, scope)])


def _since(span: timedelta) -> datetime:
    return datetime.now(UTC) - span


def _buckets(calls: list[ToolCallRecord], bucket: Bucket) -> list[CallBucket]:
    """`tool_call_buckets` of these calls, oldest first: the same UTC hours or days, counts and nearest-rank
    percentiles as the database computes."""
    slots: dict[datetime, list[ToolCallRecord]] = {}
    for call in calls:
        start = call.created_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        slots.setdefault(start if bucket == "hour" else start.replace(hour=0), []).append(call)
    found = []
    for start in sorted(slots):
        members = slots[start]
        latencies = [c.latency_ms for c in members]
        found.append(CallBucket(
            start=start, calls=len(members),
            found=sum(1 for c in members if c.found and c.tool_name == TOOL_NAME),
            errors=sum(1 for c in members if c.error is not None),
            p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95),
            lookups=sum(1 for c in members if c.tool_name == TOOL_NAME)))
    return found


class Calls:
    """`kb.calls`: the call log as one actor may read it. For a reader limited to some audiences, a call is
    shown only when every page its answer named is one the reader may read (another caller's answer names
    pages), in the list, the charts and the queries that need attention alike."""

    def __init__(self, calls: ToolCalls, acting: Acting):
        self._calls = calls
        self._acting = acting

    def recent(self, limit: int = 500) -> list[ToolCallRecord]:
        """The most recent tool calls (`lookup_knowledge` and `read_document`), newest first."""
        return self._calls.recent(limit, self._acting.scope)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every call so far is in the log (or `timeout` seconds); whether they all are."""
        return self._calls.recorder.flush(timeout)

    def not_logged(self, span: timedelta) -> int:
        """Calls of the last `span` the log could not store (counted instead: `tool_call_dropped`), plus those
        this process counted and has not stored yet. 0 is the normal case."""
        return self._calls.not_logged(span)

    def buckets(self, span: timedelta) -> list[CallBucket]:
        """Calls, found-rate and latency per hour (up to two days) or day over `span`."""
        return self._calls.buckets(span, self._acting.scope)

    def needing_attention(self, span: timedelta) -> list[AttentionGroup]:
        """Queries of `span` answered with nothing, L1 only or low confidence, grouped."""
        return self._calls.needing_attention(span, self._acting.scope)

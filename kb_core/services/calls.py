"""The agents' tools as the facade serves them: a call with raw arguments (`lookup_knowledge` or
`read_document`), timed, logged to the call log and counted in the metrics under its caller; and the call log
read back (recent calls, hourly or daily buckets, the queries that need attention)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kb_core.agent.call_stats import AttentionGroup, CallBucket, bucket_for, needs_attention
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
    from kb_core.ops.metrics import KnowledgeBaseMetrics
    from kb_core.retrieval.scope import Scope
    from kb_core.services.parts import Parts
    from kb_core.storage.metadata_store import ToolCallRecord

log = logging.getLogger(__name__)


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
        return [c for c in calls if all(self._may_read(s, scope) for s in c.sources)]

    def _may_read(self, source: str, scope: Scope) -> bool:
        entry = self._index.get(source)
        return entry is not None and scope.may_read(entry.category, entry.audience)

    def not_logged(self, span: timedelta) -> int:
        self.recorder.flush(2)
        return self._metadata.tool_calls_dropped(_since(span)) + self.recorder.waiting_drops

    def buckets(self, span: timedelta) -> list[CallBucket]:
        self.recorder.flush(2)
        return self._metadata.tool_call_buckets(_since(span), bucket_for(span))

    def needing_attention(self, span: timedelta) -> list[AttentionGroup]:
        self.recorder.flush(2)
        return needs_attention(self._metadata.tool_calls_needing_attention(_since(span)))


def _since(span: timedelta) -> datetime:
    return datetime.now(UTC) - span

"""`lookup_knowledge` for agents (Spec 7): the function, its schema, argument checks and the call log.

The console's playground, the MCP server and Python agents all go through `LookupTool.call`, so they can
never disagree. Bad arguments give an error *result* an agent can read, never an exception that kills its
loop. Every call is logged to the `tool_call` table by a background writer: a slow or dead database never
slows or breaks a lookup (a WARN is logged instead).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kb_core.errors import ToolArgumentError
from kb_core.retrieval.lookup import HybridLookup, LookupResult

log = logging.getLogger(__name__)

TOOL_NAME = "lookup_knowledge"
MAX_QUERY_CHARS = 2000
TOOL_DESCRIPTION = (
    "Look up the team's knowledge base (error codes, API notes, runbooks). Prefer this tool whenever you meet "
    "an error code (e.g. ERR_TIMEOUT), an API or class name, or a known domain term: it first matches the query "
    "exactly against document keywords and returns the whole matching document with confidence 'high'; when "
    "there is no single exact match it automatically adds the most relevant passage from a semantic/full-text "
    "search as 'supplement'. Returns JSON {found, primary, supplement}. "
    "primary.availableSections lists the document's sections (heading paths such as 'Attributes > upstream'; "
    "null when it has no headings), because content shows only the first 2,000 characters. "
    "To read one of them, call again with the same query and section_title set to one of those names: content "
    "becomes that section, primary.section says which, and a 'note' explains a name that matched none or several."
)
SECTION_TITLE_DESCRIPTION = (
    "Optional: one of primary.availableSections from a previous answer (or a heading's text); the primary's "
    "content is then that section instead of the document's first 2,000 characters."
)
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "What to look up: an error code, API name, term, or a short question.",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
        },
        "section_title": {
            "type": ["string", "null"],
            "description": SECTION_TITLE_DESCRIPTION,
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def openai_tool_schema() -> dict[str, Any]:
    """The tool as an OpenAI-style function-calling schema (also accepted by LangChain's `bind_tools`)."""
    return {"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                             "parameters": INPUT_SCHEMA}}


def validate_arguments(arguments: Any) -> tuple[str, str | None]:
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(f"arguments must be an object with a 'query' string, got {type(arguments).__name__}")
    unknown = sorted(set(arguments) - {"query", "section_title"})
    if unknown:
        raise ToolArgumentError(f"unknown argument(s): {', '.join(map(str, unknown))}; expected query, section_title")
    query = arguments.get("query")
    if query is None:
        raise ToolArgumentError("missing required argument 'query'")
    if not isinstance(query, str):
        raise ToolArgumentError(f"'query' must be a string, got {type(query).__name__}")
    if not query.strip():
        raise ToolArgumentError("'query' must not be empty or only white space")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolArgumentError(f"'query' is {len(query)} characters; at most {MAX_QUERY_CHARS} are accepted")
    section = arguments.get("section_title")
    if section is not None and not isinstance(section, str):
        raise ToolArgumentError(f"'section_title' must be a string or null, got {type(section).__name__}")
    return query.strip(), (section.strip() or None) if section else None


@dataclass(frozen=True)
class ToolResponse:
    payload: dict[str, Any]  # exactly what the agent receives
    result: LookupResult | None  # with the trace; None when the arguments were refused
    error: str | None
    latency_ms: float


class CallSink(Protocol):
    def record_tool_call(self, **fields: Any) -> Any: ...


class CallRecorder:
    """Writes call records on a background thread; `flush()` waits for the queue (tests, shutdown)."""

    def __init__(self, sink: CallSink, *, max_pending: int = 1000):
        self._sink = sink
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=max_pending)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._warned_at = 0.0

    def record(self, **fields: Any) -> None:
        self._ensure_thread()
        try:
            self._queue.put_nowait(fields)
        except queue.Full:
            self._warn("tool-call log queue is full; dropping a record")

    def flush(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="kb-tool-call-log", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            fields = self._queue.get()
            try:
                if fields is not None:
                    self._sink.record_tool_call(**fields)
            except Exception as exc:  # noqa: BLE001 - the log must never take the tool down
                self._warn(f"could not record a tool call: {exc}")
            finally:
                self._queue.task_done()

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at > 60:  # one WARN a minute while the database stays down
            self._warned_at = now
            log.warning(message)


def _error_payload(message: str) -> dict[str, Any]:
    return {"found": False, "primary": None, "supplement": None, "error": message}


class LookupTool:
    def __init__(self, lookup: HybridLookup, recorder: CallRecorder | None = None):
        self._lookup = lookup
        self._recorder = recorder

    def call(self, arguments: Any, *, caller: str = "python") -> ToolResponse:
        started = time.perf_counter()
        result: LookupResult | None = None
        error: str | None = None
        try:
            query, section = validate_arguments(arguments)
            result = self._lookup.lookup(query, section)
            payload = result.to_dict()
        except ToolArgumentError as exc:
            error = f"invalid arguments: {exc}"
            payload = _error_payload(error)
        except Exception as exc:  # noqa: BLE001 - an agent loop must get a readable answer, not a crash
            error = f"lookup failed: {type(exc).__name__}: {exc}"
            log.exception("lookup_knowledge failed")
            payload = _error_payload(error)
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        if self._recorder is not None:
            self._recorder.record(
                tool_name=TOOL_NAME,
                arguments=_loggable(arguments, result),
                found=bool(payload.get("found")),
                match_types=result.match_types if result else (),
                sources=tuple(p["source"] for p in (payload.get("primary"), payload.get("supplement")) if p),
                latency_ms=latency_ms,
                request_id=result.trace.request_id if result else None,
                caller=caller,
                error=error,
                confidence=(payload.get("primary") or {}).get("confidence"),
            )
        return ToolResponse(payload, result, error, latency_ms)


def _loggable(arguments: Any, result: LookupResult | None = None) -> dict[str, Any]:
    """The arguments as logged; with a `section_title`, `_section` records the heading path served (null:
    none, the answer's note says why)."""
    if not isinstance(arguments, Mapping):
        return {"_raw": repr(arguments)[:200]}
    logged = _loggable_fields(arguments)
    if result is not None and result.trace.section_title:
        logged["_section"] = result.primary.section if result.primary else None
    return logged


def _loggable_fields(arguments: Mapping[str, Any]) -> dict[str, Any]:
    logged: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            logged[str(key)] = value[:MAX_QUERY_CHARS]
        elif value is None or isinstance(value, (bool, int, float)):
            logged[str(key)] = value
        else:
            logged[str(key)] = repr(value)[:200]
    return logged

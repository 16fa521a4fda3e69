"""The agents' tools (Spec 7): `lookup_knowledge` and `read_document`, their schemas, argument checks and the
call log.

`lookup_knowledge` answers a query (L0, then L1); `read_document` serves a document an answer named (a
supplement's or an alternative's source) exactly as a lookup serves its primary. The console's playground, the
MCP server and Python agents all go through `LookupTool.call` / `ReadDocumentTool.call`, so they can never
disagree. Bad arguments give an error *result* an agent can read, never an exception that kills its loop.
Every call is logged to the `tool_call` table (with its `tool_name`) by a background writer: a slow or dead
database never slows or breaks a call (a WARN is logged instead).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kb_core.errors import ToolArgumentError, UnknownSourceError
from kb_core.logs import current_request_id
from kb_core.retrieval.lookup import HybridLookup, LookupResult
from kb_core.retrieval.reading import DocumentReader, ReadResult

log = logging.getLogger(__name__)

TOOL_NAME = "lookup_knowledge"
READ_TOOL_NAME = "read_document"
TOOL_NAMES = (TOOL_NAME, READ_TOOL_NAME)
MAX_QUERY_CHARS = 2000
MAX_SOURCE_CHARS = 1000
TOOL_DESCRIPTION = (
    "Look up the team's knowledge base (error codes, API notes, runbooks). Prefer this tool whenever you meet "
    "an error code (e.g. ERR_TIMEOUT), an API or class name, or a known domain term: it first matches the query "
    "exactly against document keywords and returns the whole matching document with confidence 'high'; when "
    "there is no single exact match it automatically adds the most relevant passage from a semantic/full-text "
    "search as 'supplement'. Returns JSON {found, primary, supplement}. "
    "primary.availableSections lists the document's sections (heading paths such as 'Attributes > upstream'; "
    "null when it has no headings), because content shows only the first 2,000 characters. "
    "To read one of them, call again with the same query and section_title set to one of those names: content "
    "becomes that section, primary.section says which, and a 'note' explains a name that matched none or several. "
    "To read a document an answer only points to (supplement.source: L1 gives a passage, not the document; or "
    "an alternatives[].source), call read_document with that source: it is served like a primary, and "
    "read_document's section_title reads one of its sections."
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


READ_TOOL_DESCRIPTION = (
    "Read one document of the team's knowledge base by its source, served exactly like lookup_knowledge's "
    "primary: JSON {found, primary, supplement: null} where primary.content is the document's first 2,000 "
    "characters (cleaned), primary.matchType is 'read', confidence 'high', and primary.availableSections lists "
    "its sections (heading paths; null when it has no headings). Call it after lookup_knowledge to read a "
    "document an answer only points to: supplement.source (the supplement is one passage, not the document) or "
    "an alternatives[].source. Set section_title to one of primary.availableSections to read that section "
    "instead: primary.section says which, and a 'note' explains a name that matched none or several. source must "
    "be a source from an answer (or a path below the knowledge base such as 'api/payment-errors.md'); any other "
    "source returns an error."
)
READ_SECTION_TITLE_DESCRIPTION = (
    "Optional: one of primary.availableSections (from this document's read_document or lookup_knowledge "
    "answer) or a heading's text; content is then that section instead of the document's first 2,000 "
    "characters."
)
READ_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source": {
            "type": "string",
            "description": "The document to read: a source from an answer (primary.source, supplement.source, "
                           "alternatives[].source), e.g. 'knowledge_base/api/payment-errors.md', or its path "
                           "below the knowledge base, e.g. 'api/payment-errors.md'.",
            "minLength": 1,
            "maxLength": MAX_SOURCE_CHARS,
        },
        "section_title": {
            "type": ["string", "null"],
            "description": READ_SECTION_TITLE_DESCRIPTION,
        },
    },
    "required": ["source"],
    "additionalProperties": False,
}


def openai_tool_schema() -> dict[str, Any]:
    """`lookup_knowledge` as an OpenAI-style function-calling schema (also accepted by LangChain's `bind_tools`)."""
    return {"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                             "parameters": INPUT_SCHEMA}}


def openai_read_tool_schema() -> dict[str, Any]:
    """`read_document` as an OpenAI-style function-calling schema."""
    return {"type": "function", "function": {"name": READ_TOOL_NAME, "description": READ_TOOL_DESCRIPTION,
                                             "parameters": READ_INPUT_SCHEMA}}


def openai_tool_schemas() -> list[dict[str, Any]]:
    """Both tools (`lookup_knowledge`, `read_document`) as OpenAI-style schemas: hand the list to `tools=`."""
    return [openai_tool_schema(), openai_read_tool_schema()]


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
    return query.strip(), _section_title(arguments)


def validate_read_arguments(arguments: Any) -> tuple[str, str | None]:
    """(source, section_title) of a `read_document` call, or `ToolArgumentError` saying what is wrong."""
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(f"arguments must be an object with a 'source' string, got {type(arguments).__name__}")
    unknown = sorted(set(arguments) - {"source", "section_title"})
    if unknown:
        raise ToolArgumentError(f"unknown argument(s): {', '.join(map(str, unknown))}; expected source, section_title")
    source = arguments.get("source")
    if source is None:
        raise ToolArgumentError("missing required argument 'source'")
    if not isinstance(source, str):
        raise ToolArgumentError(f"'source' must be a string, got {type(source).__name__}")
    if not source.strip():
        raise ToolArgumentError("'source' must not be empty or only white space")
    if len(source) > MAX_SOURCE_CHARS:
        raise ToolArgumentError(f"'source' is {len(source)} characters; at most {MAX_SOURCE_CHARS} are accepted")
    return source.strip(), _section_title(arguments)


def _section_title(arguments: Mapping[str, Any]) -> str | None:
    section = arguments.get("section_title")
    if section is not None and not isinstance(section, str):
        raise ToolArgumentError(f"'section_title' must be a string or null, got {type(section).__name__}")
    return (section.strip() or None) if section else None


@dataclass(frozen=True)
class ToolResponse:
    payload: dict[str, Any]  # exactly what the agent receives
    # a lookup's result (with the trace) or a read's; None when the arguments were refused
    result: LookupResult | ReadResult | None
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


class _AgentTool:
    """One tool: arguments in, the agent's payload out (an error result instead of an exception), logged."""

    name = ""
    failure = "call failed"

    def __init__(self, recorder: CallRecorder | None = None):
        self._recorder = recorder

    def _answer(self, arguments: Any) -> LookupResult | ReadResult:
        raise NotImplementedError

    @staticmethod
    def _request_id(result: Any) -> str | None:
        return None

    @staticmethod
    def _section_asked(result: Any) -> bool:
        return False

    def call(self, arguments: Any, *, caller: str = "python") -> ToolResponse:
        started = time.perf_counter()
        result: LookupResult | ReadResult | None = None
        error: str | None = None
        try:
            result = self._answer(arguments)
            payload = result.to_dict()
        except ToolArgumentError as exc:
            error = f"invalid arguments: {exc}"
            payload = _error_payload(error)
        except UnknownSourceError as exc:
            error = str(exc)
            payload = _error_payload(error)
        except Exception as exc:  # noqa: BLE001 - an agent loop must get a readable answer, not a crash
            error = f"{self.failure}: {type(exc).__name__}: {exc}"
            log.exception("%s failed", self.name)
            payload = _error_payload(error)
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        if self._recorder is not None:
            logged = _loggable(arguments)
            if result is not None and self._section_asked(result):
                # the heading path served (null: none, the answer's note says why)
                logged["_section"] = result.primary.section if result.primary else None
            self._recorder.record(
                tool_name=self.name,
                arguments=logged,
                found=bool(payload.get("found")),
                match_types=result.match_types if result else (),
                sources=tuple(p["source"] for p in (payload.get("primary"), payload.get("supplement")) if p),
                latency_ms=latency_ms,
                request_id=self._request_id(result) if result else current_request_id(),
                caller=caller,
                error=error,
                confidence=(payload.get("primary") or {}).get("confidence"),
            )
        return ToolResponse(payload, result, error, latency_ms)


class LookupTool(_AgentTool):
    """`lookup_knowledge`: the L0 -> L1 lookup of a query."""

    name = TOOL_NAME
    failure = "lookup failed"

    def __init__(self, lookup: HybridLookup, recorder: CallRecorder | None = None):
        super().__init__(recorder)
        self._lookup = lookup

    def _answer(self, arguments: Any) -> LookupResult:
        query, section = validate_arguments(arguments)
        return self._lookup.lookup(query, section)

    @staticmethod
    def _request_id(result: Any) -> str | None:
        return result.trace.request_id

    @staticmethod
    def _section_asked(result: Any) -> bool:
        return bool(result.trace.section_title)


class ReadDocumentTool(_AgentTool):
    """`read_document`: an indexed document named by its source, served as a lookup serves its primary."""

    name = READ_TOOL_NAME
    failure = "read failed"

    def __init__(self, reader: DocumentReader, recorder: CallRecorder | None = None):
        super().__init__(recorder)
        self._reader = reader

    def _answer(self, arguments: Any) -> ReadResult:
        source, section = validate_read_arguments(arguments)
        return self._reader.read(source, section)

    @staticmethod
    def _request_id(result: Any) -> str | None:
        return result.request_id

    @staticmethod
    def _section_asked(result: Any) -> bool:
        return bool(result.section_title)


def _loggable(arguments: Any) -> dict[str, Any]:
    """The arguments as logged (strings cut, anything else as a short repr)."""
    if not isinstance(arguments, Mapping):
        return {"_raw": repr(arguments)[:200]}
    return _loggable_fields(arguments)


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

"""The agents' tools: the spec's `lookup_knowledge` and `read_document`, their schemas, argument checks and the
call log.

`lookup_knowledge` answers a query (L0, then L1); `read_document` serves a document an answer named (a
supplement's or an alternative's source) exactly as a lookup serves its primary. The console's playground, the
MCP server and Python agents all go through `LookupTool.call` / `ReadDocumentTool.call`, so they can never
disagree. Bad arguments give an error *result* an agent can read, never an exception that kills its loop.
Every call is logged to the `tool_call` table (with its `tool_name`) by a background writer: a slow or dead
database never slows or breaks a call (a WARN is logged instead), and no call is dropped silently (`CallRecorder`).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from kb_core.documents.scope import ALL, Scope, check_categories, check_languages
from kb_core.errors import InvalidInputError, ToolArgumentError, UnknownSourceError
from kb_core.ops.logs import current_request_id
from kb_core.retrieval.lookup import HybridLookup, LookupResult
from kb_core.retrieval.reading import DocumentReader, ReadResult

log = logging.getLogger(__name__)

TOOL_NAME = "lookup_knowledge"
READ_TOOL_NAME = "read_document"
TOOL_NAMES = (TOOL_NAME, READ_TOOL_NAME)
MAX_QUERY_CHARS = 2000  # the one query-length limit of kb_core: `check_query_length`
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
CATEGORY_DESCRIPTION = (
    "Optional: only documents of this category, a folder of the knowledge base with its sub-folders (e.g. "
    "'gateway' or 'ops/runbooks'); the sources of earlier answers show the folders. Narrows both the keyword "
    "match and the passage search, so a narrowed question still gets its best passages."
)
LANGUAGE_DESCRIPTION = (
    "Optional: only documents in this language, a tag such as 'en' or 'zh' (zh-CN is zh)."
)
FILTER_PROPERTIES: dict[str, Any] = {
    "category": {"type": ["string", "null"], "description": CATEGORY_DESCRIPTION, "maxLength": 255},
    "language": {"type": ["string", "null"], "description": LANGUAGE_DESCRIPTION, "maxLength": 35},
}
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
        **FILTER_PROPERTIES,
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
        "language": {"type": ["string", "null"], "maxLength": 35,
                     "description": "Optional: the page's version in this language ('en', 'zh'), when it has one."},
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
    unknown = sorted(set(arguments) - {"query", "section_title", "category", "language"})
    if unknown:
        raise ToolArgumentError(f"unknown argument(s): {', '.join(map(str, unknown))}; expected query, section_title, "
                                "category, language")
    query = arguments.get("query")
    if query is None:
        raise ToolArgumentError("missing required argument 'query'")
    if not isinstance(query, str):
        raise ToolArgumentError(f"'query' must be a string, got {type(query).__name__}")
    if not query.strip():
        raise ToolArgumentError("'query' must not be empty or only white space")
    check_query_length(query, ToolArgumentError)
    return query.strip(), _section_title(arguments)


def validate_read_arguments(arguments: Any) -> tuple[str, str | None]:
    """(source, section_title) of a `read_document` call, or `ToolArgumentError` saying what is wrong."""
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(f"arguments must be an object with a 'source' string, got {type(arguments).__name__}")
    unknown = sorted(set(arguments) - {"source", "section_title", "language"})
    if unknown:
        raise ToolArgumentError(f"unknown argument(s): {', '.join(map(str, unknown))}; expected source, section_title, "
                                "language")
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


def narrowed(arguments: Mapping[str, Any], scope: Scope, *, category: bool = True) -> Scope:
    """The caller's scope narrowed by the call's optional `category` and `language` (`ToolArgumentError` for
    one that is not a string, a valid folder path or a language tag)."""
    values = {}
    for name in ("category", "language") if category else ("language",):
        value = arguments.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if not isinstance(value, str):
            raise ToolArgumentError(f"'{name}' must be a string or null, got {type(value).__name__}")
        try:
            values[name] = check_categories(value, name) if name == "category" else check_languages(value, name)
        except InvalidInputError as exc:
            raise ToolArgumentError(str(exc)) from None
    if not values:
        return scope
    return replace(scope, categories=values.get("category", scope.categories),
                   languages=values.get("language", scope.languages))


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


class BatchCallSink(CallSink, Protocol):
    def record_tool_calls(self, records: Sequence[Mapping[str, Any]], *, dropped: int = 0, reason: str = "") -> int:
        ...


def stamped(fields: dict[str, Any]) -> dict[str, Any]:
    """A call record with its time: the call's, not the later write's."""
    fields.setdefault("created_at", datetime.now(UTC).replace(tzinfo=None))
    return fields


class CallRecorder:
    """Writes call records on a background thread, many to a transaction, so a call never waits for the
    database and a burst of calls is logged as fast as the database takes batches.

    Nothing is dropped silently. While the database cannot take records (down, frozen), they wait here and the
    writer tries again, backing off up to `MAX_BACKOFF` seconds. Only past `max_pending` waiting records is a
    new one not kept: it is counted, and the count is stored (`tool_call_dropped`, with the reason) with the
    next batch that gets through; the Tool calls page shows it. A batch the database refuses while it accepts
    other writes is written call by call, and the calls it still refuses are counted the same way.
    `flush()` waits (on a condition) until everything recorded so far is stored."""

    BATCH = 500
    MAX_BACKOFF = 10.0
    FAILURES_BEFORE_CHECK = 3  # failed tries of one batch before checking whether the database works at all

    def __init__(self, sink: CallSink, *, max_pending: int = 50_000, batch_size: int = BATCH):
        self._sink = sink
        self._max_pending = max_pending
        self._batch_size = batch_size
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        self._changed = threading.Condition()
        self._writing = 0  # records the writer has taken and not yet stored (or given back)
        self._dropped: dict[str, int] = {}  # reason -> calls not logged and not yet stored as a count
        self._dropped_total = 0  # every call this recorder could not log (stored or not)
        self._writing_dropped = 0  # of those, the count the writer has taken and not yet stored
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._warned_at = 0.0

    def record(self, **fields: Any) -> None:
        stamped(fields)
        with self._changed:
            if len(self._pending) + self._writing >= self._max_pending:
                self._count_dropped(1, f"the call log's queue was full ({self._max_pending:,} calls waiting "
                                       "for the database)")
            else:
                self._pending.append(fields)
            self._changed.notify_all()
        self._ensure_thread()

    @property
    def not_logged(self) -> int:
        """Calls this recorder could not log (whether or not that count has been stored yet)."""
        return self._dropped_total

    @property
    def waiting_drops(self) -> int:
        """Calls counted as not logged whose count is not stored yet."""
        with self._changed:
            return sum(self._dropped.values()) + self._writing_dropped

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every record so far is stored (or `timeout` seconds); whether it all was."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._pending or self._writing or self._writing_dropped or self._dropped:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._changed.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush, then stop the writer. What the database still would not take is reported (it cannot be
        stored anywhere else)."""
        self.flush(timeout)
        self._stop.set()
        with self._changed:
            lost = len(self._pending) + self._writing + self._writing_dropped + sum(self._dropped.values())
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, timeout))
        if lost:
            log.warning("%d tool calls were not logged: the database did not take them before closing", lost)

    def _count_dropped(self, count: int, reason: str) -> None:
        """Under `_changed`."""
        self._dropped[reason] = self._dropped.get(reason, 0) + count
        self._dropped_total += count
        self._warn(f"tool-call log: {reason}; the number of calls not logged is stored with the log")

    def _ensure_thread(self) -> None:
        if self._thread is None:
            with self._changed:
                if self._thread is None and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, name="kb-tool-call-log", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        backoff = 0.0
        failures = 0
        while not self._stop.is_set():
            with self._changed:
                while not (self._pending or self._dropped) and not self._stop.is_set():
                    self._changed.wait()
                batch = [self._pending.popleft() for _ in range(min(self._batch_size, len(self._pending)))]
                dropped, self._dropped = self._dropped, {}
                self._writing = len(batch)
                self._writing_dropped = sum(dropped.values())
            try:
                self._write(batch, dropped)
                stored, backoff, failures = True, 0.0, 0
            except Exception as exc:  # noqa: BLE001 - the log must never take the tool down
                stored = False
                failures += 1
                self._warn(f"could not record {len(batch)} tool calls (kept; trying again): {exc}")
                if failures >= self.FAILURES_BEFORE_CHECK and batch and self._database_works():
                    self._one_by_one(batch)  # the batch is the problem, not the database
                    batch, stored, failures = [], True, 0
                    with self._changed:  # the counts taken with it go with the next batch
                        for reason, count in dropped.items():
                            self._dropped[reason] = self._dropped.get(reason, 0) + count
            with self._changed:
                self._writing = self._writing_dropped = 0
                if not stored:  # back to the front, in order; the counts too
                    self._pending.extendleft(reversed(batch))
                    for reason, count in dropped.items():
                        self._dropped[reason] = self._dropped.get(reason, 0) + count
                self._changed.notify_all()
            if not stored:
                backoff = min(self.MAX_BACKOFF, max(0.25, backoff * 2))
                self._stop.wait(backoff)

    def _write(self, batch: list[dict[str, Any]], dropped: dict[str, int]) -> None:
        record_many = getattr(self._sink, "record_tool_calls", None)
        if record_many is None:  # a sink without batches (a test double)
            for fields in batch:
                self._sink.record_tool_call(**fields)
            for reason, count in dropped.items():
                log.warning("%d tool calls were not logged: %s", count, reason)
            return
        # one transaction: the calls and the count of those not logged are stored together, or neither is
        record_many(batch, dropped=sum(dropped.values()), reason="; ".join(dropped)[:255])

    def _database_works(self) -> bool:
        """After repeated failures of one batch: does the database take a small write? If so the batch itself
        is the problem (it is then written call by call)."""
        record_many = getattr(self._sink, "record_tool_calls", None)
        if record_many is None:
            return False
        try:
            record_many([], dropped=0)
            return True
        except Exception:  # noqa: BLE001 - still down: keep the batch and keep trying
            return False

    def _one_by_one(self, batch: list[dict[str, Any]]) -> None:
        refused = 0
        problem = ""
        for fields in batch:
            try:
                self._sink.record_tool_call(**fields)
            except Exception as exc:  # noqa: BLE001
                refused += 1
                problem = str(exc)
        if refused:
            with self._changed:
                self._count_dropped(refused, f"the database refused them: {problem}"[:255])

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at > 60:  # one WARN a minute while the database stays down
            self._warned_at = now
            log.warning(message)


def check_query_length(query: object, error: type[InvalidInputError] = InvalidInputError) -> None:
    """The one query-length rule of kb_core, with its one message: a query of more than `MAX_QUERY_CHARS`
    characters is refused with `error` before anything reads it (the tools, `lookup`, the documents suggested
    for a query, labelled queries). Tokenising 100,000 characters takes tens of seconds, and no question needs
    them. Anything but a string is left to the caller's other checks."""
    if isinstance(query, str) and len(query) > MAX_QUERY_CHARS:
        raise error(f"the query is {len(query):,} characters; at most {MAX_QUERY_CHARS:,} are accepted (the "
                    f"tools' query takes at most {MAX_QUERY_CHARS} characters): ask with the words that matter")


def error_payload(message: str) -> dict[str, Any]:
    """The one shape of a tool's error answer (a tool, an unknown tool, a knowledge base that cannot be
    opened): the answer's fields, nothing found, and the message as `error`."""
    return {"found": False, "primary": None, "supplement": None, "error": message}


class _AgentTool:
    """One tool: arguments in, the agent's payload out (an error result instead of an exception), logged."""

    name = ""
    failure = "call failed"

    def __init__(self, recorder: CallRecorder | None = None):
        self._recorder = recorder

    def _answer(self, arguments: Any, scope: Scope) -> LookupResult | ReadResult:
        raise NotImplementedError

    @staticmethod
    def _request_id(result: Any) -> str | None:
        return None

    @staticmethod
    def _section_asked(result: Any) -> bool:
        return False

    def call(self, arguments: Any, *, caller: str = "python", scope: Scope = ALL) -> ToolResponse:
        """`scope`: what this caller may read (a named token's audiences and categories); the arguments'
        `category` and `language` narrow it further."""
        started = time.perf_counter()
        result: LookupResult | ReadResult | None = None
        error: str | None = None
        try:
            result = self._answer(arguments, scope)
            payload = result.to_dict()
        except ToolArgumentError as exc:
            error = f"invalid arguments: {exc}"
            payload = error_payload(error)
        except UnknownSourceError as exc:
            error = str(exc)
            payload = error_payload(error)
        except Exception as exc:  # noqa: BLE001 - an agent loop must get a readable answer, not a crash
            error = f"{self.failure}: {type(exc).__name__}: {exc}"
            log.exception("%s failed", self.name)
            payload = error_payload(error)
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

    def _answer(self, arguments: Any, scope: Scope) -> LookupResult:
        query, section = validate_arguments(arguments)
        return self._lookup.lookup(query, section, narrowed(arguments, scope))

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

    def _answer(self, arguments: Any, scope: Scope) -> ReadResult:
        source, section = validate_read_arguments(arguments)
        languages = narrowed(arguments, ALL, category=False).languages
        return self._reader.read(source, section, scope=scope, language=languages[0] if languages else None)

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

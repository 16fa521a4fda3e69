"""Logging: the request id and caller of the call in progress, and the JSON-lines log file (`KB_LOG_FILE`).

A tool call (`KnowledgeBase.call_tool`) and a lookup run inside `log_context(request_id=..., caller=...)`:
every record logged meanwhile in that thread (or task) carries them, whichever module logs it. The request id is
the one the playground's "why" panel and the Tool calls table show, so a curator finds the log lines of one
answer with `grep '"request_id": "<id>"'`.

`configure_log_file(path)` adds one rotating JSON-lines file to the root logger (one per process: configuring
another path replaces it). Each line is an object: `time` (UTC, ISO 8601), `level`, `logger`, `message`,
`request_id`, `caller`, `pid`, and `timings_ms` / `exception` when the record has them.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.handlers
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOG_FILE_MAX_BYTES = 10 * 1024 * 1024  # a file rotates at 10 MiB ...
LOG_FILE_BACKUPS = 5  # ... and 5 rotated files are kept (file.1 ... file.5)
LOG_FILE_LEVEL = logging.INFO

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("kb_request_id", default=None)
_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("kb_caller", default=None)


def new_request_id() -> str:
    """8 random hex digits (as `uuid4().hex[:8]` gave, for less)."""
    return os.urandom(4).hex()


def current_request_id() -> str | None:
    """The request id of the call in progress in this thread/task, if any."""
    return _request_id.get()


def current_caller() -> str | None:
    return _caller.get()


class log_context:  # noqa: N801 - used like a function: `with log_context(request_id=...):`
    """Records logged inside the block carry `request_id` and `caller` (those not given stay as they were). A
    class rather than a generator: it runs on every lookup, and costs less so."""

    __slots__ = ("_request_id", "_caller", "_tokens")

    def __init__(self, *, request_id: str | None = None, caller: str | None = None) -> None:
        self._request_id = request_id
        self._caller = caller
        self._tokens: tuple[Any, Any] = (None, None)

    def __enter__(self) -> None:
        self._tokens = (_request_id.set(self._request_id) if self._request_id is not None else None,
                        _caller.set(self._caller) if self._caller is not None else None)

    def __exit__(self, *exc: object) -> None:
        request_token, caller_token = self._tokens
        if caller_token is not None:
            _caller.reset(caller_token)
        if request_token is not None:
            _request_id.reset(request_token)


class ContextFilter(logging.Filter):
    """Puts the context's request id and caller on each record (a value passed in `extra=` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = _request_id.get()
        if getattr(record, "caller", None) is None:
            record.caller = _caller.get()
        return True


class RepeatFilter(logging.Filter):
    """One message of a kind per `window` seconds; the others are counted, and the next one that passes says
    how many were left out ("… (and 4,722 more like it in the last 60 s)"). A kind is the logger, the level and
    the message's template (`log.warning("cannot read %s", path)` for any path): a flood of one background
    message - a watcher's queue overflowing, a store that is down - stays a few lines a minute, and a
    different message is never held back. A request's own lines (logged with its request id: each lookup, its
    error) are never held back. Attached to the handlers kb_core configures (the log file, stderr)."""

    def __init__(self, window: float = 60.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window = window
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], list[float | int]] = {}  # kind -> [first passed at, held back]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if current_request_id() is not None:  # a request's own line (its lookup, its error): always written
            return True
        # the template as logged: another handler's filter may have annotated the shared record already
        template = getattr(record, "kb_template", None)
        kind = (record.name, record.levelno, str(record.msg) if template is None else template)
        now = self._clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self._window:
                seen[1] += 1
                return False
            held = int(seen[1]) if seen is not None else 0
            if len(self._kinds) > 10_000:  # many one-off messages: forget them all rather than grow
                self._kinds.clear()
            self._kinds[kind] = [now, 0]
        if held and template is None:
            record.kb_template = str(record.msg)
            record.msg = f"{record.msg} (and {held:,} more like it in the last {self._window:g} s)"
        return True


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "caller": getattr(record, "caller", None),
            "pid": record.process,
        }
        timings = getattr(record, "timings_ms", None)
        if timings:
            line["timings_ms"] = dict(timings)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


_lock = threading.Lock()
_file_handler: logging.handlers.RotatingFileHandler | None = None
_package_level: int | None = None  # kb_core's logger level before the file lowered it (restored on stop)
_stderr_handler: logging.Handler | None = None  # stands in for logging.lastResort, which a file would silence


def log_file_path(value: str | os.PathLike[str], app_root: str | os.PathLike[str] | None = None) -> Path:
    """`KB_LOG_FILE` as a path: `{pid}` becomes this process's id (one file per process: rotation is not safe
    across processes), a relative path resolves against the application root."""
    path = Path(str(value).replace("{pid}", str(os.getpid()))).expanduser()
    return path if path.is_absolute() or app_root is None else Path(app_root) / path


def configure_log_file(path: str | os.PathLike[str] | None) -> logging.Handler | None:
    """Write this process's log records (INFO and above) to `path` as rotating JSON lines; idempotent for the
    same path; another path replaces the previous file; `None` stops writing one. Records of kb_core's loggers
    at INFO reach the file even when the root logger is quieter (what other handlers print is unchanged: see
    `log_to_stderr`)."""
    global _file_handler, _package_level, _stderr_handler
    with _lock:
        root = logging.getLogger()
        wanted = Path(path).absolute() if path is not None else None
        if _file_handler is not None:
            if wanted is not None and Path(_file_handler.baseFilename) == wanted:
                return _file_handler
            root.removeHandler(_file_handler)
            _file_handler.close()
            _file_handler = None
        package = logging.getLogger("kb_core")
        if wanted is None:
            if _package_level is not None:
                package.setLevel(_package_level)
                _package_level = None
            if _stderr_handler is not None:
                root.removeHandler(_stderr_handler)
                _stderr_handler = None
            return None
        wanted.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(wanted, maxBytes=LOG_FILE_MAX_BYTES,
                                                       backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
        handler.setLevel(LOG_FILE_LEVEL)
        handler.addFilter(ContextFilter())
        handler.addFilter(RepeatFilter())
        handler.setFormatter(JsonLinesFormatter())
        if not root.handlers and _stderr_handler is None:
            # with no handler at all, Python prints WARNING and above on stderr (logging.lastResort); a file
            # handler would end that: keep printing them (the console's terminal shows kb_core's warnings)
            _stderr_handler = logging.StreamHandler(sys.stderr)
            _stderr_handler.setLevel(logging.WARNING)
            _stderr_handler.addFilter(RepeatFilter())
            root.addHandler(_stderr_handler)
        root.addHandler(handler)
        if package.getEffectiveLevel() > LOG_FILE_LEVEL:
            _package_level = package.level if _package_level is None else _package_level
            package.setLevel(LOG_FILE_LEVEL)
        _file_handler = handler
        return handler


def counted_warnings_on_stderr() -> None:
    """Where nothing configured logging (the console under `streamlit run`: Streamlit sets up its own loggers
    only), Python prints every WARNING on stderr unfiltered (`logging.lastResort`): a watcher's queue overflowing
    printed thousands of lines. Print them through a `RepeatFilter` instead; a process that configured logging
    keeps its own."""
    with _lock:
        if not logging.getLogger().handlers:
            log_to_stderr(logging.WARNING)


def log_to_stderr(level: int | str, fmt: str = "%(levelname)s %(name)s: %(message)s") -> None:
    """`logging.basicConfig` on stderr whose handler itself keeps to `level`: a log file that lets kb_core's
    INFO records through does not make a quiet command chatty."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level.upper() if isinstance(level, str) else level)
    handler.addFilter(RepeatFilter())
    handler.setFormatter(logging.Formatter(fmt))
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level, handlers=[handler])

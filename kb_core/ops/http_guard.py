"""The one way this package serves HTTP (the MCP server and the metrics port): uvicorn with a guarded
h11 protocol, so slow and idle clients cannot hold the process.

- **Deadlines.** A connection must deliver a request's headers within `header_seconds` of connecting (or of its
  last response), and its body within `body_seconds` of the headers; otherwise it is closed. Between requests a
  keep-alive connection stays `idle_seconds`. Once a request is complete the app's own deadlines apply
  (`KB_TOOL_TIMEOUT`), and a long answer (an SSE stream) is never cut.
- **A cap below the descriptor limit.** At most `max_connections` are open (default: half of what the soft
  descriptor limit leaves after 256 for the rest of the process, at most 1,000). At the cap a new connection
  takes the place of the oldest one that is only waiting (no request in progress); when every one is busy, it
  is closed at once - never queued. So a flood of idle connections costs the process a bounded number of
  descriptors, and a real client still gets in.
- **Quiet logs.** What the guard does is logged as one summary per interval with counts; records of the HTTP
  stack's own loggers (asyncio, uvicorn) are let through once per interval per kind, with the count of the
  others and the exception's one-line text instead of a traceback per connection.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# the name its log lines had before the module moved into ops/: log filters and alerts on it keep working
log = logging.getLogger("kb_core.http_guard")

__all__ = ["ConnectionGuard", "HttpLimits", "OncePerInterval", "quiet_http_logs", "serve", "start_in_thread"]

LOG_INTERVAL = 60.0  # seconds between two records of one kind


@dataclass(frozen=True)
class HttpLimits:
    header_seconds: float = 10.0
    body_seconds: float = 30.0
    idle_seconds: float = 5.0
    max_connections: int | None = None

    def connection_cap(self) -> int:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        room = 1000 if soft == resource.RLIM_INFINITY else max(8, min(1000, (soft - 256) // 2))
        return min(self.max_connections, room) if self.max_connections else room


class ConnectionGuard:
    """The open connections of one server, oldest first, and what the guard did to them (counted)."""

    def __init__(self, limits: HttpLimits, name: str):
        self.limits = limits
        self.name = name
        self.cap = limits.connection_cap()
        self.open: OrderedDict[Any, None] = OrderedDict()
        self.counts = {"refused": 0, "evicted": 0, "timed out": 0}
        self._since = time.monotonic()
        self._logged: float | None = None  # when the last summary was logged
        self._lock = threading.Lock()

    def admit(self, connection: Any) -> bool:
        """Room for a new connection: at the cap, the oldest waiting one is closed for it; False when all are
        busy (the new one is then closed by the caller)."""
        if len(self.open) >= self.cap:
            victim = next((c for c in self.open if c.waiting()), None)
            if victim is None:
                self.count("refused")
                return False
            self.open.pop(victim, None)
            victim.transport.abort()
            self.count("evicted")
        self.open[connection] = None
        return True

    def forget(self, connection: Any) -> None:
        self.open.pop(connection, None)

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1
            now = time.monotonic()
            if self._logged is not None and now - self._logged < LOG_INTERVAL:
                return  # told with the next summary
            summary = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
            seconds = now - self._since
            self.counts = dict.fromkeys(self.counts, 0)
            self._since = self._logged = now
        log.warning("%s: %s connection(s) in the last %.0f s (slow or idle clients; at most %d open, headers "
                    "within %g s, a body within %g s)", self.name, summary, seconds, self.cap,
                    self.limits.header_seconds, self.limits.body_seconds)

    def protocol_class(self) -> type:
        """uvicorn's h11 protocol with this guard's deadlines and cap (`uvicorn.Config(http=...)`)."""
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol

        guard = self

        class GuardedH11Protocol(H11Protocol):
            _deadline: asyncio.TimerHandle | None = None
            _refused = False

            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                if not guard.admit(self):
                    self._refused = True
                    transport.abort()
                    return
                self._arm(guard.limits.header_seconds)

            def connection_lost(self, exc: Exception | None) -> None:
                self._cancel()
                guard.forget(self)
                super().connection_lost(exc)

            def data_received(self, data: bytes) -> None:
                if self._refused:
                    return
                before = self.conn.their_state
                super().data_received(data)
                state = self.conn.their_state
                if state is h11.SEND_BODY and before is not h11.SEND_BODY:
                    self._arm(guard.limits.body_seconds)  # the headers are in: now the body
                elif state is h11.DONE:
                    self._cancel()  # the request is complete: the app's deadlines apply

            def on_response_complete(self) -> None:
                super().on_response_complete()
                if not self.transport.is_closing():
                    self._arm(guard.limits.header_seconds)  # the next request's headers (idle: uvicorn's keep-alive)

            def waiting(self) -> bool:
                """No request in progress: headers not complete, or idle between requests."""
                return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

            def _arm(self, seconds: float) -> None:
                self._cancel()
                self._deadline = self.loop.call_later(seconds, self._expire)

            def _cancel(self) -> None:
                if self._deadline is not None:
                    self._deadline.cancel()
                    self._deadline = None

            def _expire(self) -> None:
                self._deadline = None
                if self.transport.is_closing():
                    return
                if self.waiting() or self.conn.their_state is h11.SEND_BODY:
                    guard.count("timed out")
                    self.transport.abort()

        return GuardedH11Protocol


class OncePerInterval(logging.Filter):
    """Lets one record of a kind (logger, level, message template, exception type) through per interval, with
    the number of the others appended, and the exception as one line instead of its traceback."""

    def __init__(self, interval: float = LOG_INTERVAL):
        super().__init__()
        self._interval = interval
        self._seen: dict[tuple, list] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        key = (record.name, record.levelno, str(record.msg)[:200], type(error).__name__)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self._interval:
                seen[1] += 1
                return False
            others = seen[1] if seen is not None else 0
            if len(self._seen) > 1000:
                self._seen.clear()
            self._seen[key] = [now, 0]
        if error is not None or others:
            message = record.getMessage()
            if error is not None:
                message += f" ({type(error).__name__}: {error})"
                record.exc_info, record.exc_text = None, None
            if others:
                message += f" [{others} more like it in the last {now - seen[0]:.0f} s]"
            record.msg, record.args = message, ()
        return True


_QUIETED: set[str] = set()


def quiet_http_logs(interval: float = LOG_INTERVAL) -> None:
    """Put `OncePerInterval` on the HTTP stack's loggers (once per process)."""
    for name in ("asyncio", "uvicorn", "uvicorn.error", "uvicorn.access", "mcp.server.streamable_http_manager",
                 "mcp.server.streamable_http"):
        if name not in _QUIETED:
            logging.getLogger(name).addFilter(OncePerInterval(interval))
            _QUIETED.add(name)


def config(app: Any, *, host: str, port: int, limits: HttpLimits, name: str) -> Any:
    import uvicorn

    quiet_http_logs()
    guard = ConnectionGuard(limits, name)
    return uvicorn.Config(app, host=host, port=port, log_level="warning", http=guard.protocol_class(),
                          timeout_keep_alive=max(1, int(limits.idle_seconds)), ws="none", lifespan="auto",
                          log_config=None)


def serve(app: Any, *, host: str, port: int, limits: HttpLimits = HttpLimits(), name: str = "HTTP") -> None:
    """Serve an ASGI app on this thread until interrupted."""
    import uvicorn

    uvicorn.Server(config(app, host=host, port=port, limits=limits, name=name)).run()


class BackgroundServer:
    """An ASGI app served on a thread of its own (its own event loop) until `stop()`."""

    def __init__(self, server: Any, thread: threading.Thread):
        self._server, self._thread = server, thread

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)


def start_in_thread(app: Any, *, host: str, port: int, limits: HttpLimits = HttpLimits(), name: str = "HTTP",
                    wait: float = 10.0) -> BackgroundServer:
    """Serve on a daemon thread; returns once it listens. `OSError` when the port cannot be bound."""
    import uvicorn

    server = uvicorn.Server(config(app, host=host, port=port, limits=limits, name=name))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the starter below
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"kb-{name.lower().replace(' ', '-')}-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + wait
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        server.should_exit = True
        thread.join(1)
        error = failure[0] if failure else None
        raise OSError(f"{name} not served on {host}:{port}: {error or 'did not start'}")
    return BackgroundServer(server, thread)

"""Both HTTP servers under slow and idle clients: the guarded uvicorn server closes connections that
do not deliver their headers or body in time, keeps at most its cap open (a new connection takes an idle one's
place; when all are busy it is closed at once), logs one summary instead of a line per connection, and the
metrics port cannot take its host process's file descriptors."""

from __future__ import annotations

import logging
import os
import socket
import time
import urllib.request

import pytest
from support.documents import doc
from support.servers import free_port

from kb_core.ops.http_guard import HttpLimits, OncePerInterval, start_in_thread


async def _hello(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _partial(port: int, data: bytes = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(data)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _get(port: int, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as response:
        return response.read()


@pytest.fixture
def guarded():
    servers = []

    def start(limits: HttpLimits):
        port = free_port()
        servers.append(start_in_thread(_hello, host="127.0.0.1", port=port, limits=limits, name="test server"))
        return port

    yield start
    for server in servers:
        server.stop()


def test_idle_and_partial_connections_are_closed_and_a_real_request_still_gets_in(guarded, caplog):
    caplog.set_level(logging.INFO)
    cap = 40
    port = guarded(HttpLimits(header_seconds=1.5, body_seconds=1.5, idle_seconds=1, max_connections=cap))
    before = _fds()
    idle = [_partial(port) for _ in range(3 * cap)]  # three times the cap: headers begun, never finished
    idle += [_partial(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab") for _ in range(5)]
    idle += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]  # nothing at all
    try:
        started = time.monotonic()
        assert _get(port) == b"hello"  # a real client gets in while the flood holds its connections
        assert time.monotonic() - started < 5
        # the server's own descriptors stay within its cap (our client ends are counted in this process too)
        _wait_until(lambda: _fds() - before <= len(idle) + cap + 10, 10, "the server holds more than its cap")
        _wait_until(lambda: sum(map(_closed_by_server, idle)) >= 0.9 * len(idle), 15,
                    "the server did not close the idle connections")
        assert _get(port) == b"hello"
    finally:
        for sock in idle:
            sock.close()
    summaries = [r for r in caplog.records if r.name == "kb_core.http_guard"]
    assert 1 <= len(summaries) <= 3, [r.getMessage() for r in summaries]  # one line per interval, not per client
    assert "evicted" in summaries[0].getMessage() or "timed out" in summaries[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)


def test_a_slow_body_is_cut_at_its_deadline_but_a_finished_request_is_served(guarded):
    port = guarded(HttpLimits(header_seconds=5, body_seconds=1, max_connections=10))
    slow = _partial(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12")
    started = time.monotonic()
    _wait_until(lambda: _closed_by_server(slow), 10, "a body that never came kept its connection")
    assert 0.8 <= time.monotonic() - started < 5
    done = _partial(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
    done.settimeout(5)
    assert done.recv(100).startswith(b"HTTP/1.1 200")
    done.close()


def test_at_the_cap_with_every_connection_busy_a_new_one_is_closed_at_once(guarded):
    import asyncio

    release = asyncio.Event()
    arrived: list[int] = []

    async def busy(scope, receive, send):  # answers only once released: every connection is busy
        if scope["type"] != "http":
            return
        arrived.append(1)
        await release.wait()

    port = free_port()
    server = start_in_thread(busy, host="127.0.0.1", port=port, limits=HttpLimits(max_connections=3), name="busy")
    try:
        held = [_partial(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(3)]
        _wait_until(lambda: len(arrived) == 3, 10, "the held requests did not reach the app")
        refused = socket.create_connection(("127.0.0.1", port), timeout=5)
        refused.settimeout(5)
        started = time.monotonic()
        try:
            assert refused.recv(1) == b""
        except ConnectionResetError:
            pass
        assert time.monotonic() - started < 2, "a connection past the cap waited instead of being refused"
        assert not any(_closed_by_server(s) for s in held), "a busy connection was closed for a new one"
    finally:
        server.stop(1)
        for sock in held:
            sock.close()


def test_once_per_interval_collapses_a_flood_of_tracebacks_into_one_line_with_a_count(caplog):
    logger = logging.getLogger("test.flood")
    logger.addFilter(OncePerInterval(interval=60))
    caplog.set_level(logging.WARNING, logger="test.flood")
    for i in range(5000):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            logger.exception("socket.accept() out of system resource (%d)", i)
    logger.warning("another kind")
    records = [r for r in caplog.records if r.name == "test.flood"]
    assert len(records) == 2 and all(r.exc_info is None for r in records)
    assert "Too many open files" in records[0].getMessage()


def test_the_metrics_port_cannot_starve_its_host_process(open_kb, tmp_path):
    port = free_port()
    kb = open_kb(metrics_port=port)
    before = _fds()
    idle = [_partial(port) for _ in range(300)]
    try:
        # the server holds at most its cap (32) once it has caught up; the rest of the descriptors are ours
        _wait_until(lambda: _fds() - before <= len(idle) + 32 + 10, 10, "the metrics port holds more than its cap")
        record = kb.documents.upload("still-works.md", doc("Still works", ["STILL_WORKS"]).encode(), "ops").document
        assert "STILL_WORKS" in kb.documents.text(record.file_path)
        assert kb.read_document_tool(record.file_path)["found"] is True
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert b"kb_" in response.read()
    finally:
        for sock in idle:
            sock.close()

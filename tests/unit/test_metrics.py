"""Prometheus metrics and the JSON-lines log file, on real stores (SQLite + Milvus
Lite): a scrape after a known sequence of lookups and writes shows exactly those counts, and every log line is
JSON carrying the request id of the call that produced it."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.documents import doc
from support.servers import free_port
from support.stores import summaries_of

from kb_core.bootstrap import parts_of
from kb_core.errors import KnowledgeBaseError
from kb_core.ops.logs import JsonLinesFormatter, configure_log_file, log_context
from kb_core.ops.metrics import KnowledgeBaseMetrics, MetricsRoute, loopback_host


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value of every sample in a scrape."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(scrape: dict, metric: str, /, **labels: str) -> float:
    return scrape[(metric, tuple(sorted(labels.items())))]


def scrape_http(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        return samples(response.read().decode())


@pytest.fixture
def kb(open_kb):
    return open_kb(metrics_port=free_port())


def _upload(kb, name: str, keywords: list[str]) -> None:
    kb.documents.upload(name, doc(name.removesuffix(".md"), keywords,
                                  body=f"# {name}\n\nAbout {' '.join(keywords)}.\n").encode(),
              "api")


def test_a_scrape_shows_exactly_the_lookups_and_writes(kb, monkeypatch):
    port = kb.settings.metrics_port
    before = scrape_http(port)
    assert value(before, "kb_l0_outcomes_total", outcome="unique") == 0  # every series is there from the start
    assert value(before, "kb_write_failures_total", operation="upload") == 0

    _upload(kb, "alpha.md", ["ERR_ALPHA", "shared_term"])
    _upload(kb, "beta.md", ["ERR_BETA", "shared_term"])
    _upload(kb, "gamma.md", ["ERR_GAMMA"])
    with pytest.raises(KnowledgeBaseError):
        kb.documents.upload("notes.txt", b"plain text", "api")  # refused: a failed upload
    gamma = next(d for d in kb.documents.list() if d.file_path.endswith("gamma.md"))
    kb.documents.delete(gamma.id)
    kb.documents.reconcile()

    assert kb.call_tool({"query": "ERR_ALPHA"}).payload["found"]  # unique: L0 alone
    assert kb.call_tool({"query": "shared_term"}).result.trace.l1_called  # ambiguous: L0 + L1
    kb.lookup("nothing matches this query zzz")  # a miss, through the facade's lookup
    kb.call_tool({"query": 42})  # refused arguments: an error, no lookup
    kb.call_tool({"source": "api/alpha.md"}, tool="read_document")

    def broken(*args, **kwargs):
        raise RuntimeError("milvus down")

    monkeypatch.setattr(parts_of(kb).lookup._l1, "search", broken)
    failed = kb.call_tool({"query": "ERR_BETA shared_term"})  # ambiguous, and L1 fails
    assert failed.result.trace.l1_error and failed.payload["found"]

    kb.status()  # what the scrape reads: the cached status
    scrape = scrape_http(port)
    assert value(scrape, "kb_l0_outcomes_total", outcome="unique") == 1
    assert value(scrape, "kb_l0_outcomes_total", outcome="ambiguous") == 2
    assert value(scrape, "kb_l0_outcomes_total", outcome="miss") == 1
    assert value(scrape, "kb_l1_errors_total") == 1
    assert value(scrape, "kb_lookup_duration_seconds_count", path="l0_unique") == 1
    assert value(scrape, "kb_lookup_duration_seconds_count", path="l0_l1") == 2
    assert value(scrape, "kb_lookup_duration_seconds_count", path="l1_only") == 1
    assert 0 < value(scrape, "kb_lookup_duration_seconds_sum", path="l0_unique") < 5
    assert value(scrape, "kb_tool_calls_total", tool="lookup_knowledge", outcome="found") == 3
    assert value(scrape, "kb_tool_calls_total", tool="lookup_knowledge", outcome="error") == 1
    assert value(scrape, "kb_tool_calls_total", tool="read_document", outcome="found") == 1
    assert value(scrape, "kb_write_duration_seconds_count", operation="upload") == 4
    assert value(scrape, "kb_write_failures_total", operation="upload") == 1
    assert value(scrape, "kb_write_duration_seconds_count", operation="delete") == 1
    assert value(scrape, "kb_write_failures_total", operation="delete") == 0
    assert value(scrape, "kb_job_duration_seconds_count", name="reconcile") == 1
    assert value(scrape, "kb_job_duration_seconds_count", name="reindex_all") == 0
    for store in ("files", "l0", "database", "milvus"):
        assert value(scrape, "kb_documents", store=store) == 2
    counts = kb.status().counts
    assert value(scrape, "kb_chunks", store="database") == counts.database_chunks > 0
    assert value(scrape, "kb_chunks", store="milvus") == counts.milvus_chunks
    assert value(scrape, "kb_store_up", store="database") == value(scrape, "kb_store_up", store="milvus") == 1
    assert value(scrape, "kb_consistent") == 1
    assert 0 <= value(scrape, "kb_change_feed_lag_seconds") < 60
    assert value(scrape, "kb_change_feed_behind_changes") >= 0
    assert value(scrape, "process_resident_memory_bytes") > 0
    # the registry itself says the same as its HTTP server
    direct = samples(generate_latest(kb.metrics_registry).decode())
    assert value(direct, "kb_write_duration_seconds_count", operation="upload") == 4


def test_a_scrape_never_computes_the_status(open_kb):
    """Before any status was computed a scrape has no store counts (and starts computing them in the
    background); once that is done, the next scrape has them."""
    kb = open_kb()
    first = samples(generate_latest(kb.metrics_registry).decode())
    assert not any(name == "kb_documents" for name, _ in first)
    # the background refresh the first scrape started: wait for its result, not a fixed time
    deadline = time.monotonic() + 30
    while summaries_of(kb).peek("status") is None:
        assert time.monotonic() < deadline, "the status was never refreshed"
        time.sleep(0.05)
    later = samples(generate_latest(kb.metrics_registry).decode())
    assert value(later, "kb_documents", store="database") == 0


def test_each_knowledge_base_has_its_own_registry():
    one, two = KnowledgeBaseMetrics(process=False), KnowledgeBaseMetrics(process=False)  # no name collision
    with one.timed("upload"):
        pass
    with pytest.raises(ValueError), two.timed("reconcile"):
        raise ValueError("boom")
    assert value(samples(generate_latest(one.registry).decode()), "kb_write_duration_seconds_count",
                 operation="upload") == 1
    scrape = samples(generate_latest(two.registry).decode())
    assert value(scrape, "kb_write_duration_seconds_count", operation="upload") == 0
    assert value(scrape, "kb_job_failures_total", name="reconcile") == 1


def test_the_metrics_port_answers_loopback_hosts_only_and_a_taken_port_is_logged(caplog):
    metrics = KnowledgeBaseMetrics(process=False)
    port = free_port()
    assert metrics.serve(port)
    other = KnowledgeBaseMetrics(process=False)
    try:
        assert "kb_l0_outcomes_total" in str(scrape_http(port))
        # a web page that rebinds its own name to 127.0.0.1 sends its name as Host: refused
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        with caplog.at_level(logging.WARNING):
            assert not other.serve(port)
        assert "metrics not served" in caplog.text
    finally:
        metrics.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)  # closed with the knowledge base


def test_loopback_host_names():
    assert all(loopback_host(h) for h in (None, "127.0.0.1:9", "localhost", "LOCALHOST:80", "[::1]:8765"))
    assert not any(loopback_host(h) for h in ("evil.example", "evil.example:8765", "10.0.0.1:80", "[fe80::1]:1"))


def test_metrics_route_answers_loopback_hosts_only():
    """On loopback without a token, `/metrics` answers only a loopback `Host` (no DNS rebinding); any other
    path goes to the MCP app."""
    metrics = KnowledgeBaseMetrics(process=False)
    reached: list[str] = []

    async def mcp_app(scope, receive, send):
        reached.append(scope["path"])

    route = MetricsRoute(mcp_app, metrics.registry, loopback_only=True)

    def get(path: str, host: bytes) -> int:
        sent: list[dict] = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [(b"host", host)]}
        asyncio.run(route(scope, receive, send))
        return sent[0]["status"] if sent else 0

    assert get("/metrics", b"127.0.0.1:8765") == 200
    assert get("/metrics", b"evil.example:8765") == 403
    assert get("/mcp", b"evil.example:8765") == 0 and reached == ["/mcp"]  # the MCP transport checks its own


# -- the log file ---------------------------------------------------------------------------------------------------
@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "logs" / "kb-{pid}.jsonl"
    yield path
    configure_log_file(None)


def _lines(directory) -> list[dict]:
    return [json.loads(line) for file in sorted(directory.glob("kb-*.jsonl"))
            for line in file.read_text(encoding="utf-8").splitlines()]


def test_log_lines_are_json_and_carry_the_request_id(open_kb, log_file, monkeypatch):
    kb = open_kb(log_file=str(log_file))
    _upload(kb, "alpha.md", ["ERR_ALPHA"])
    answer = kb.call_tool({"query": "ERR_ALPHA"}, caller="mcp")

    def broken(*args, **kwargs):
        raise RuntimeError("milvus down")

    monkeypatch.setattr(parts_of(kb).lookup._l1, "search", broken)
    failed = kb.call_tool({"query": "nothing matches this"}, caller="playground")
    refused = kb.call_tool({"query": ""}, caller="mcp")

    lines = _lines(log_file.parent)  # every line parsed as JSON (json.loads raises otherwise)
    assert lines and all({"time", "level", "logger", "message", "request_id", "caller", "pid"} <= set(line)
                         for line in lines)
    assert all(line["time"].endswith("Z") for line in lines)

    request = answer.result.trace.request_id
    mine = [line for line in lines if line["request_id"] == request]
    (lookup_line,) = [line for line in mine if line["logger"] == "kb_core.retrieval.lookup"]
    assert lookup_line["level"] == "INFO" and lookup_line["caller"] == "mcp" and "ERR_ALPHA" in lookup_line["message"]
    assert lookup_line["timings_ms"]["total"] > 0 and "l0" in lookup_line["timings_ms"]

    failing = [line for line in lines if line["request_id"] == failed.result.trace.request_id]
    assert {line["level"] for line in failing} >= {"ERROR", "INFO"}
    assert all(line["caller"] == "playground" for line in failing)
    assert any("milvus down" in line["message"] for line in failing)

    # the call log shows the same request ids: a curator goes from the Tool calls table to the log lines
    kb.calls.flush()
    calls = {c.request_id: c for c in kb.calls.recent()}
    assert calls[request].caller == "mcp" and calls[failed.result.trace.request_id].caller == "playground"
    refused_id = next(c.request_id for c in kb.calls.recent() if c.error)
    assert any(line["request_id"] == refused_id and line["level"] == "INFO" and "invalid arguments" in
               line["message"] for line in lines), refused.error

    # the write's lines carry the actor as caller and a request id of their own
    upload = [line for line in lines if line["logger"] == "kb_core.documents.service" and "alpha.md" in line["message"]]
    assert upload and upload[0]["caller"] == "agent" and upload[0]["request_id"] not in (None, request)


def test_configuring_the_log_file_is_idempotent_and_keeps_stderr_quiet(log_file, tmp_path):
    path = tmp_path / "logs" / "kb-1.jsonl"
    handler = configure_log_file(path)
    assert configure_log_file(path) is handler
    assert sum(h is handler for h in logging.getLogger().handlers) == 1
    other = configure_log_file(tmp_path / "logs" / "kb-2.jsonl")
    assert handler not in logging.getLogger().handlers and other in logging.getLogger().handlers
    with log_context(request_id="abcd1234", caller="cli"):
        logging.getLogger("kb_core.test").info("hello %s", "world", extra={"timings_ms": {"total": 1.5}})
    (line,) = [json.loads(x) for x in (tmp_path / "logs" / "kb-2.jsonl").read_text().splitlines()]
    assert line["message"] == "hello world" and line["request_id"] == "abcd1234" and line["caller"] == "cli"
    assert line["timings_ms"] == {"total": 1.5} and line["logger"] == "kb_core.test"
    assert not (tmp_path / "logs" / "kb-1.jsonl").read_text()


def test_an_exception_is_one_json_line():
    record = logging.LogRecord("kb_core.x", logging.ERROR, __file__, 1, "failed: %s", ("x",), None)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record.exc_info = sys.exc_info()
    text = JsonLinesFormatter().format(record)
    assert "\n" not in text and "ValueError" in json.loads(text)["exception"]

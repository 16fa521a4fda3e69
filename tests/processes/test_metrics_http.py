"""`/metrics` of the MCP HTTP server as a real process (`python -m kb_core.mcp --http`): behind the bearer token
like `/mcp`, counting exactly the calls made, and its `KB_LOG_FILE` written as JSON lines with each call's
request id and caller."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.mcp_http import INITIALIZE, TOKEN
from support.mcp_http import post as _post
from support.mcp_http import start as _start
from support.mcp_http import stop as _stop

pytestmark = pytest.mark.processes


def _scrape(port: int, token: str | None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return 200, found


def _call(port: int, session: str, call_id: int, name: str, arguments: dict) -> str:
    body = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    status, _, text = _post(port, body, token=TOKEN, session=session)
    assert status == 200
    return text


def test_metrics_of_the_mcp_server_behind_its_token(sample_root):
    log_file = sample_root / "logs" / "mcp.jsonl"
    proc, port = _start(sample_root, KB_MCP_TOKEN=TOKEN, KB_LOG_FILE=str(log_file))
    try:
        assert _scrape(port, None)[0] == 401  # the token guards /metrics as it guards /mcp
        assert _scrape(port, "wrong-token-of-the-same-shape-000000")[0] == 401
        status, before = _scrape(port, TOKEN)
        assert status == 200 and before[("kb_l0_outcomes_total", (("outcome", "unique"),))] == 0
        status, headers, _ = _post(port, INITIALIZE, token=TOKEN)
        session = headers["mcp-session-id"]
        _post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token=TOKEN, session=session)
        assert "payment-errors.md" in _call(port, session, 2, "lookup_knowledge", {"query": "ERR_TIMEOUT"})
        assert "must be a string" in _call(port, session, 3, "lookup_knowledge", {"query": 42})
        _call(port, session, 4, "lookup_knowledge", {"query": "zzqx nothing anywhere"})
        _call(port, session, 5, "read_document", {"source": "api/payment-errors.md"})

        status, after = _scrape(port, TOKEN)
        assert status == 200

        def value(name: str, **labels: str) -> float:
            return after[(name, tuple(sorted(labels.items())))]

        assert value("kb_tool_calls_total", tool="lookup_knowledge", outcome="found") == 1
        assert value("kb_tool_calls_total", tool="lookup_knowledge", outcome="error") == 1
        assert value("kb_tool_calls_total", tool="lookup_knowledge", outcome="not_found") == 1
        assert value("kb_tool_calls_total", tool="read_document", outcome="found") == 1
        outcomes = {o: value("kb_l0_outcomes_total", outcome=o) for o in ("unique", "ambiguous", "miss")}
        assert sum(outcomes.values()) == 2 and outcomes["miss"] == 1
        lookups = sum(value("kb_lookup_duration_seconds_count", path=p) for p in ("l0_unique", "l0_l1", "l1_only"))
        assert lookups == 2 and value("kb_l1_errors_total") == 0
        assert value("kb_write_failures_total", operation="upload") == 0
        assert value("kb_tool_calls_by_caller_total", caller="default") == 4  # KB_MCP_TOKEN's name
    finally:
        _stop(proc)

    lines = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
    lookups = [line for line in lines if line["logger"] == "kb_core.retrieval.lookup" and line["level"] == "INFO"]
    assert len(lookups) == 2 and all(line["caller"] == "default" and len(line["request_id"]) == 8 for line in lookups)
    assert lookups[0]["request_id"] != lookups[1]["request_id"] and "ERR_TIMEOUT" in lookups[0]["message"]
    refused = [line for line in lines if "must be a string" in line["message"]]
    assert refused and refused[0]["caller"] == "default" and refused[0]["request_id"] not in (
        lookups[0]["request_id"], lookups[1]["request_id"], None)


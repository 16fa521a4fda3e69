"""The MCP server over streamable HTTP, as a real process (`python -m kb_core.mcp --http`): a bearer token
when one is configured, a refusal to listen beyond loopback without one, and idle sessions closed and
capped."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support.mcp_http import INITIALIZE, TOKEN
from support.mcp_http import mcp_env as _env
from support.mcp_http import post as _post
from support.mcp_http import start as _start
from support.mcp_http import stop as _stop
from support.paths import REPO
from support.servers import free_port

from kb_core.errors import SettingsError
from kb_core.mcp import BearerTokenGate, load_tokens

pytestmark = pytest.mark.processes


def test_a_token_is_required_when_configured(sample_root):
    proc, port = _start(sample_root, KB_MCP_TOKEN=TOKEN)
    try:
        status, headers, _ = _post(port, INITIALIZE, token=None)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert _post(port, INITIALIZE, token="wrong-token-of-the-same-shape-000000")[0] == 401
        assert _post(port, INITIALIZE, token=TOKEN[:-1])[0] == 401
        status, headers, body = _post(port, INITIALIZE, token=TOKEN)
        assert status == 200 and "knowledge-base" in body
        session = headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "lookup_knowledge", "arguments": {"query": "ERR_TIMEOUT"}}}
        _post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token=TOKEN, session=session)
        status, _, body = _post(port, call, token=TOKEN, session=session)
        assert status == 200 and "payment-errors.md" in body
        assert _post(port, call, token=None, session=session)[0] == 401  # a session id is no credential
    finally:
        _stop(proc)


def test_beyond_loopback_without_a_token_refuses_to_start(sample_root):
    done = subprocess.run([sys.executable, "-m", "kb_core.mcp", "--http", "--host", "0.0.0.0",
                           "--port", str(free_port())], env=_env(sample_root), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "refusing to listen on 0.0.0.0 without a token" in done.stderr


def test_idle_sessions_close_and_their_number_is_capped(sample_root):
    """At the cap the oldest idle session makes room for a new client (a hoarder no longer locks others
    out with 503 for the idle timeout); idle sessions still close by themselves."""
    proc, port = _start(sample_root, "--max-sessions", "2", "--session-idle", "2")
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    try:
        sessions = [_post(port, INITIALIZE, token=None)[1]["mcp-session-id"] for _ in range(2)]
        status, headers, _ = _post(port, INITIALIZE, token=None)
        assert status == 200 and headers["mcp-session-id"] not in sessions
        assert _post(port, ping, token=None, session=sessions[0])[0] == 404  # the oldest made room
        deadline = time.monotonic() + 60
        log = sample_root / f"mcp-{port}.log"  # (a request would keep it alive: the server's log tells)
        while f"Session {sessions[1]} idle timeout" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, "idle sessions stayed open"
            time.sleep(0.2)
        assert _post(port, ping, token=None, session=sessions[1])[0] == 404
    finally:
        _stop(proc)


def test_one_token_cannot_take_the_sessions_of_another(sample_root, tmp_path):
    hoarder, other = "hoarder-token-0123456789abcdef", "another-token-0123456789abcdef"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hoarder}\n{other}\n", encoding="utf-8")
    proc, port = _start(sample_root, "--max-sessions", "4", KB_MCP_TOKENS_FILE=str(tokens))
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    try:
        hoarded = [_post(port, INITIALIZE, token=hoarder)[1]["mcp-session-id"] for _ in range(10)]
        # its share is half: each session beyond it took the place of its own oldest idle one
        alive = [s for s in hoarded if _post(port, ping, token=hoarder, session=s)[0] == 200]
        assert alive == hoarded[-2:]
        mine = []
        for _ in range(3):
            status, headers, body = _post(port, INITIALIZE, token=other)
            assert status == 200, body  # never 503 because of the hoarder
            mine.append(headers["mcp-session-id"])
        assert [_post(port, ping, token=other, session=s)[0] for s in mine] == [404, 200, 200]
        assert [_post(port, ping, token=hoarder, session=s)[0] for s in alive] == [200, 200]
        assert _post(port, ping, token=other, session=alive[0])[0] == 404  # a session is its token's only
    finally:
        _stop(proc)


def test_tokens_come_from_the_variable_and_the_file(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("# one per line\n\nabcdefghijklmnop-1\n  abcdefghijklmnop-2  \n", encoding="utf-8")
    assert load_tokens("abcdefghijklmnop-0", str(tokens)) == ("abcdefghijklmnop-0", "abcdefghijklmnop-1",
                                                             "abcdefghijklmnop-2")
    assert load_tokens(None, None) == ()
    with pytest.raises(SettingsError, match="at least 16 characters"):
        load_tokens("short")
    with pytest.raises(SettingsError, match="cannot read"):
        load_tokens(None, str(tmp_path / "missing"))
    gate = BearerTokenGate(None, ["abcdefghijklmnop-0"])
    assert gate._allowed(b"Bearer abcdefghijklmnop-0") and gate._allowed(b"bearer abcdefghijklmnop-0")
    assert not gate._allowed(b"Basic abcdefghijklmnop-0") and not gate._allowed(None)
    assert not gate._allowed(b"Bearer ") and not gate._allowed(b"Bearer abcdefghijklmnop-00")


def test_the_documented_python_client_reaches_the_server(sample_root):
    """docs/agents.md's client for the pinned SDK (mcp 2.x: an httpx client carries the token, snake_case
    results), run against the real server."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    proc, port = _start(sample_root, KB_MCP_TOKEN=TOKEN)

    async def ask() -> tuple[bool, dict]:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})
                return result.is_error, result.structured_content

    try:
        is_error, answer = asyncio.run(ask())
    finally:
        _stop(proc)
    assert not is_error and answer["primary"]["source"] == "knowledge_base/api/payment-errors.md"
    documented = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    assert "streamable_http_client(\"http://127.0.0.1:8765/mcp\", http_client=http) as (read, write, *_)" in documented

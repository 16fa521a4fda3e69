"""Named MCP tokens, on the real server process: a YAML tokens file gives each token a name, the
audiences whose pages it may read and optionally folders; the call log names the token; a token removed from
the file is refused from the next request on, without a restart."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from support.documents import write_doc
from support.mcp_http import post as _post
from support.mcp_http import start as _start
from support.mcp_http import stop as _stop

from kb_core.agent.tokens import NamedToken, TokenTable, parse_tokens
from kb_core.errors import SettingsError
from kb_core.storage.metadata_store import MetadataStore

pytestmark = pytest.mark.processes

SUPPORT = "support-token-0123456789abcdef"
SRE = "sre-token-0123456789abcdef-sre"
PAGE = "knowledge_base/internal/postmortem.md"
POSTMORTEM = """---
title: Payment outage postmortem
keywords: [PAY-OUTAGE-7]
summary: What failed in the payment outage.
audience: [sre]
updated: 2026-11-02
---

# Payment outage postmortem

The payment gateway's connection pool was exhausted for twelve minutes after a retry storm.
"""
TOKENS = f"""# who may ask what
- name: support-bot
  token: {SUPPORT}
  audiences: [support]
- name: sre-bot
  token: {SRE}
  audiences: [sre]
"""


def _ask(port: int, token: str, tool: str, arguments: dict) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async def call() -> dict:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http, \
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(tool, arguments)
                if result.is_error:
                    return {"error": result.content[0].text}
                return result.structured_content

    return asyncio.run(call())


def test_named_tokens_read_their_audiences_pages_are_logged_by_name_and_can_be_revoked(sample_root):
    write_doc(sample_root, "knowledge_base/internal/postmortem.md", POSTMORTEM)
    tokens = sample_root / "tokens.yaml"
    tokens.write_text(TOKENS, encoding="utf-8")
    proc, port = _start(sample_root, KB_MCP_TOKENS_FILE=str(tokens))
    try:
        seen = _ask(port, SRE, "lookup_knowledge", {"query": "PAY-OUTAGE-7"})
        assert seen["primary"]["source"] == PAGE and seen["primary"]["updated"] == "2026-11-02"
        assert _ask(port, SRE, "read_document", {"source": "internal/postmortem.md"})["found"]
        hidden = _ask(port, SUPPORT, "lookup_knowledge", {"query": "PAY-OUTAGE-7"})
        assert hidden == _ask(port, SUPPORT, "lookup_knowledge", {"query": "PAY-OUTAGE-8"})  # as if missing
        passage = _ask(port, SUPPORT, "lookup_knowledge", {"query": "connection pool exhausted after a retry storm"})
        assert PAGE not in str(passage)
        refused = _ask(port, SUPPORT, "read_document", {"source": "internal/postmortem.md"})
        assert "no indexed document at 'internal/postmortem.md'" in refused["error"]
        # both tokens can read the public sample pages
        assert _ask(port, SUPPORT, "lookup_knowledge", {"query": "ERR_TIMEOUT"})["found"]

        store = MetadataStore(f"sqlite:///{sample_root / 'kb.sqlite3'}")
        try:
            deadline = time.monotonic() + 30
            while {c.caller for c in store.recent_tool_calls(50)} != {"support-bot", "sre-bot"}:
                assert time.monotonic() < deadline, [c.caller for c in store.recent_tool_calls(50)]
                time.sleep(0.1)
        finally:
            store.dispose()

        tokens.write_text(TOKENS.split("- name: sre-bot")[0], encoding="utf-8")  # revoke sre-bot
        deadline = time.monotonic() + 30
        while _post(port, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, token=SRE)[0] != 401:
            assert time.monotonic() < deadline, "the revoked token is still accepted"
            time.sleep(0.1)
        assert _post(port, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, token=SUPPORT)[0] != 401
    finally:
        _stop(proc)


def test_the_tokens_file_forms_and_their_errors(tmp_path):
    assert parse_tokens(TOKENS)[1] == NamedToken("sre-bot", SRE, frozenset({"sre"}), ())
    old = parse_tokens(f"# bare tokens\n{SUPPORT}\n")
    assert old[0].secret == SUPPORT and old[0].audiences is None and old[0].name.startswith("token-")
    with_folders = parse_tokens(f"- name: docs\n  token: {SUPPORT}\n  categories: [gateway/]\n")
    assert with_folders[0].categories == ("gateway",) and with_folders[0].audiences is None
    for text, message in [(f"- name: a b\n  token: {SUPPORT}\n", "a name of"),
                          ("- name: short\n  token: abc\n", "at least 16"),
                          (f"- name: x\n  token: {SUPPORT}\n- name: x\n  token: {SRE}\n", "given to two"),
                          (f"- name: x\n  token: {SUPPORT}\n  role: admin\n", "expected name, token"),
                          (f"- name: x\n  token: {SUPPORT}\n  categories: ['../etc']\n", "invalid category")]:
        with pytest.raises(SettingsError, match=message):
            parse_tokens(text)
    path = tmp_path / "tokens.yaml"
    path.write_text(TOKENS, encoding="utf-8")
    table = TokenTable("default-token-0123456789", path)
    assert [t.name for t in table.tokens()] == ["default", "support-bot", "sre-bot"]
    assert table.which(SRE.encode()).name == "sre-bot" and table.which(b"nope") is None
    with pytest.raises(SettingsError, match="cannot read"):
        TokenTable(None, Path(tmp_path / "missing.yaml"))

"""The MCP server, tested in-process with the mcp SDK's own client (Spec 7 through MCP)."""

from __future__ import annotations

import asyncio
import json

import pytest

from kb_core.agent.mcp_server import build_server
from kb_core.agent.tool import TOOL_DESCRIPTION

PAYMENT = "knowledge_base/api/payment-errors.md"


@pytest.fixture
def server(open_kb, sample_root):
    kb = open_kb(sample_root)
    kb.reconcile()
    return kb, build_server(kb)


def _run(coroutine):
    return asyncio.run(coroutine)


async def _session(server, action):
    from mcp import Client

    async with Client(server) as client:
        return await action(client)


def _payload(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_lists_the_tool_as_spec_7_1_describes(server):
    _kb, srv = server
    tools = _run(_session(srv, lambda c: c.list_tools())).tools
    assert [t.name for t in tools] == ["lookup_knowledge"]
    tool = tools[0]
    assert tool.description == TOOL_DESCRIPTION
    assert tool.input_schema["required"] == ["query"]
    assert set(tool.input_schema["properties"]) == {"query", "section_title"}
    # one sentence each tells an agent how to read past the first 2,000 characters
    assert "availableSections" in tool.description and "section_title" in tool.description
    assert "availableSections" in str(tool.input_schema["properties"]["section_title"])


def test_scenario_7_2_1_error_code_through_mcp(server):
    kb, srv = server
    result = _run(_session(srv, lambda c: c.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})))
    payload = _payload(result)
    assert payload["primary"]["source"] == PAYMENT and payload["primary"]["matchType"] == "exact_L0"
    assert payload["primary"]["confidence"] == "high" and payload["supplement"] is None
    assert kb.tool_calls()[0].caller == "mcp"


def test_scenario_7_2_2_open_question_through_mcp(server):
    _kb, srv = server
    result = _run(_session(srv, lambda c: c.call_tool("lookup_knowledge", {"query": "如何优化缓存"})))
    payload = _payload(result)
    assert payload["primary"] is None
    assert payload["supplement"]["source"] == "knowledge_base/domain/cache-optimization.md"
    assert payload["supplement"]["matchType"] == "semantic_L1"


@pytest.mark.parametrize("arguments", [{"query": "   "}, {}, {"query": 5}], ids=["blank", "missing", "wrong-type"])
def test_a_bad_call_gives_an_error_result(server, arguments):
    _kb, srv = server
    result = _run(_session(srv, lambda c: c.call_tool("lookup_knowledge", arguments)))
    assert result.is_error
    assert "query" in result.content[0].text


@pytest.mark.processes
def test_stdio_entry_point_serves_the_tool(sample_root, tmp_path):
    """`python -m kb_core.mcp` over real stdio, driven by the SDK's stdio client."""
    import os
    import sys

    from conftest import NO_MODEL
    from mcp import StdioServerParameters

    env = {**os.environ, "KB_APP_ROOT": str(sample_root), "KB_EMBEDDING_MODEL": NO_MODEL}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kb_core.mcp"], env=env)

    async def call(client):
        tools = await client.list_tools()
        answer = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})
        section = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT", "section_title": "超时排查"})
        return tools, answer, section

    tools, answer, section = _run(_session(params, call))
    assert tools.tools[0].name == "lookup_knowledge"
    assert _payload(answer)["primary"]["source"] == PAYMENT  # L0 needs no sync: the scan finds it
    primary = _payload(section)["primary"]
    assert primary["availableSections"] == ["超时排查"] and primary["section"] == "1. 超时类错误"
    assert primary["content"].startswith("## 1. 超时类错误\n") and "## 2." not in primary["content"]

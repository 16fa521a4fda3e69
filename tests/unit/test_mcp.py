"""The MCP server, tested in-process with the mcp SDK's own client (the spec's agent tool, through MCP)."""

from __future__ import annotations

import asyncio
import json

import pytest

from kb_core.agent.tool import INPUT_SCHEMA, READ_INPUT_SCHEMA, READ_TOOL_DESCRIPTION, TOOL_DESCRIPTION
from kb_core.mcp import build_server

PAYMENT = "knowledge_base/api/payment-errors.md"
CACHE = "knowledge_base/domain/cache-optimization.md"


@pytest.fixture
def server(open_kb, sample_root):
    kb = open_kb(sample_root)
    kb.documents.reconcile()
    return kb, build_server(kb)


def _run(coroutine):
    return asyncio.run(coroutine)


async def _session(server, action):
    from mcp import Client

    async with Client(server) as client:
        return await action(client)


def _payload(result) -> dict:
    assert not result.is_error, result.content
    payload = json.loads(result.content[0].text)
    assert result.structured_content == payload  # the same answer, as text and as structured content
    return payload


def _validate(schema: dict, payload: dict) -> None:
    """The payload against a tool's published outputSchema, as any MCP client would check it."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(payload)


def test_lists_the_tool_as_spec_7_1_describes(server):
    _kb, srv = server
    tools = _run(_session(srv, lambda c: c.list_tools())).tools
    assert [t.name for t in tools] == ["lookup_knowledge", "read_document"]
    tool = tools[0]
    assert tool.description == TOOL_DESCRIPTION
    assert tool.input_schema["required"] == ["query"]
    assert set(tool.input_schema["properties"]) == {"query", "section_title", "category", "language"}  # + filters
    # one sentence each tells an agent how to read past the first 2,000 characters
    assert "availableSections" in tool.description and "section_title" in tool.description
    assert "availableSections" in str(tool.input_schema["properties"]["section_title"])


def test_both_tools_publish_kb_cores_input_schema_and_an_output_schema(server):
    _kb, srv = server
    lookup, read = _run(_session(srv, lambda c: c.list_tools())).tools
    assert lookup.input_schema == INPUT_SCHEMA and read.input_schema == READ_INPUT_SCHEMA  # one schema, not two
    assert read.description == READ_TOOL_DESCRIPTION and read.input_schema["required"] == ["source"]
    for tool in (lookup, read):
        assert tool.input_schema["additionalProperties"] is False
        out = tool.output_schema
        assert out["type"] == "object" and set(out["required"]) == {"found", "primary", "supplement"}
        assert {"alternatives", "suggestions", "note", "error"} <= set(out["properties"])
        primary = out["$defs"]["PrimaryAnswer"]["properties"]
        assert {"content", "source", "matchType", "confidence", "availableSections", "section",
                "translations"} <= set(primary)
        assert "retrievers" in out["$defs"]["SupplementAnswer"]["properties"]
        assert set(out["$defs"]["Alternative"]["properties"]) == {"source", "title", "lang", "why"}
        assert set(out["$defs"]["Suggestion"]["properties"]) == {"keyword", "source", "title"}
        _validate(out, {"found": False, "primary": None, "supplement": None})
        with pytest.raises(Exception, match="'found' is a required property"):
            _validate(out, {"primary": None, "supplement": None})


def test_a_lookup_then_read_document_of_its_supplement(server):
    kb, srv = server

    async def loop(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        answer = await client.call_tool("lookup_knowledge", {"query": "如何优化缓存"})
        source = _payload(answer)["supplement"]["source"]
        read = await client.call_tool("read_document", {"source": source})
        section = await client.call_tool("read_document", {"source": "api/payment-errors.md",
                                                           "section_title": "超时排查"})
        return tools, answer, read, section

    tools, answer, read, section = _run(_session(srv, loop))
    _validate(tools["lookup_knowledge"].output_schema, answer.structured_content)
    for result in (read, section):
        _validate(tools["read_document"].output_schema, result.structured_content)
    document = _payload(read)
    assert document == kb.read_document_tool(CACHE)  # the same answer as in-process
    assert document["primary"]["source"] == CACHE and document["primary"]["matchType"] == "read"
    assert document["primary"]["confidence"] == "high" and document["supplement"] is None
    assert _payload(section)["primary"]["section"] == "1. 超时类错误"
    kb.calls.flush()
    # newest first: the in-process read last, logged with the service identity (callers are named)
    assert [(c.tool_name, c.caller) for c in kb.calls.recent()[:4]] == [
        ("read_document", "agent"), ("read_document", "mcp"), ("read_document", "mcp"), ("lookup_knowledge", "mcp")]


@pytest.mark.parametrize(("tool", "arguments", "message"), [
    ("lookup_knowledge", {"query": "ERR_TIMEOUT", "top_k": 3}, "unknown argument(s): top_k"),
    ("read_document", {"source": PAYMENT, "query": "ERR_TIMEOUT"}, "unknown argument(s): query"),
    ("read_document", {"source": "../../etc/passwd"}, "no indexed document"),
    ("read_document", {"source": 5}, "'source' must be a string"),
    ("read_document", {}, "missing required argument 'source'"),
], ids=["lookup-unknown-argument", "read-unknown-argument", "read-escape", "read-wrong-type", "read-missing"])
def test_what_is_refused_in_process_is_refused_over_mcp(server, tool, arguments, message):
    kb, srv = server
    result = _run(_session(srv, lambda c: c.call_tool(tool, arguments)))
    assert result.is_error and message in result.content[0].text
    assert result.structured_content is None
    kb.calls.flush()
    logged = kb.calls.recent()[0]  # logged like any refused call
    assert (logged.tool_name, logged.caller, logged.found) == (tool, "mcp", False) and message in logged.error


def test_scenario_7_2_1_error_code_through_mcp(server):
    kb, srv = server
    result = _run(_session(srv, lambda c: c.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})))
    payload = _payload(result)
    assert payload["primary"]["source"] == PAYMENT and payload["primary"]["matchType"] == "exact_L0"
    assert payload["primary"]["confidence"] == "high" and payload["supplement"] is None
    assert kb.calls.recent()[0].caller == "mcp"


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

    from mcp import StdioServerParameters
    from support.stores import NO_MODEL

    env = {**os.environ, "KB_APP_ROOT": str(sample_root), "KB_EMBEDDING_MODEL": NO_MODEL}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kb_core.mcp"], env=env)

    async def call(client):
        tools = await client.list_tools()
        answer = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT"})
        section = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT", "section_title": "超时排查"})
        read = await client.call_tool("read_document", {"source": "domain/cache-optimization.md",
                                                        "section_title": "Nope"})
        extra = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMEOUT", "top_k": 3})
        unsure = await client.call_tool("lookup_knowledge", {"query": "超时"})
        typo = await client.call_tool("lookup_knowledge", {"query": "ERR_TIMOUT"})
        return tools, answer, section, read, extra, unsure, typo

    tools, answer, section, read, extra, unsure, typo = _run(_session(params, call))
    # the optional fields reach an MCP client too, valid against the published output schema
    for result in (unsure, typo):
        _validate(listed_schema := {t.name: t for t in tools.tools}["lookup_knowledge"].output_schema,
                  result.structured_content)
    low = _payload(unsure)
    assert low["primary"]["confidence"] == "low" and low["alternatives"]
    assert set(low["alternatives"][0]) == {"source", "title", "lang", "why"}
    assert low["supplement"] is None or low["supplement"]["retrievers"] == ["bm25"]
    assert _payload(typo)["suggestions"][0] == {"keyword": "ERR_TIMEOUT", "source": PAYMENT,
                                                "title": _payload(answer)["primary"]["content"].split("title: ")[1]
                                                .split("\n")[0]}
    assert listed_schema
    listed = {t.name: t for t in tools.tools}
    assert list(listed) == ["lookup_knowledge", "read_document"]
    assert all(t.output_schema and t.input_schema["additionalProperties"] is False for t in listed.values())
    assert _payload(answer)["primary"]["source"] == PAYMENT  # L0 needs no sync: the scan finds it
    primary = _payload(section)["primary"]
    assert primary["availableSections"] == ["超时排查"] and primary["section"] == "1. 超时类错误"
    assert primary["content"].startswith("## 1. 超时类错误\n") and "## 2." not in primary["content"]
    document = _payload(read)  # the client validated it against the outputSchema already; check it here too
    _validate(listed["read_document"].output_schema, read.structured_content)
    assert document["primary"]["source"] == CACHE and document["primary"]["matchType"] == "read"
    assert document["primary"]["section"] is None and document["note"].startswith("no section 'Nope'")
    assert extra.is_error and "unknown argument(s): top_k" in extra.content[0].text

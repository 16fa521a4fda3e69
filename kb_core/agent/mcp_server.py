"""MCP server for agents: `python -m kb_core.mcp` serves `lookup_knowledge` and `read_document` over stdio, or
with `--http` over streamable HTTP on 127.0.0.1. It opens the knowledge base from the same settings as the
console.

It runs beside the console and other agent processes on the same settings: they share the Milvus Lite
directory (the first to open it serves it to the others) and follow each other's writes through the change feed.

Each tool is registered with kb_core's own input schema (the one `openai_tool_schemas()` gives) and its
response model as `outputSchema`. The arguments reach `KnowledgeBase.call_tool` as the agent sent them, so an
MCP call is checked exactly like an in-process one: an unknown argument, a wrong type or an unknown source is
an error result (and logged), never silently ignored.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from kb_core.agent.response import LookupResponse, ReadDocumentResponse
from kb_core.agent.tool import (
    INPUT_SCHEMA,
    READ_INPUT_SCHEMA,
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    TOOL_DESCRIPTION,
    TOOL_NAME,
)
from kb_core.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

SERVER_NAME = "knowledge-base"
INSTRUCTIONS = ("Use lookup_knowledge for error codes, API names and known terms before guessing; use "
                "read_document to read a document an answer points to (a supplement's or an alternative's source).")


def build_server(kb: KnowledgeBase) -> Any:
    """An `MCPServer` exposing `lookup_knowledge` and `read_document` bound to `kb` (calls are logged with caller
    "mcp")."""
    from mcp.server.mcpserver import MCPServer

    tools = [_tool(kb, TOOL_NAME, TOOL_DESCRIPTION, INPUT_SCHEMA, LookupResponse),
             _tool(kb, READ_TOOL_NAME, READ_TOOL_DESCRIPTION, READ_INPUT_SCHEMA, ReadDocumentResponse)]
    return MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, tools=tools)


def _tool(kb: KnowledgeBase, name: str, description: str, input_schema: dict[str, Any], response: type) -> Any:
    """One tool as the SDK's `Tool`: kb_core's input schema, the response model as output schema, and every
    argument handed to `kb.call_tool` as sent.

    The SDK's usual route (`add_tool(fn)`) derives the arguments from the function's signature and drops any
    argument it does not name; building the `Tool` here keeps the one input schema and the one validation."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
    from mcp.types import CallToolResult, TextContent
    from pydantic import ConfigDict

    class Arguments(ArgModelBase):
        """Accepts whatever the agent sent; `KnowledgeBase.call_tool` checks it."""

        model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

        def model_dump_one_level(self) -> dict[str, Any]:
            return {"arguments": dict(self.model_extra or {})}

    def call(arguments: dict[str, Any]) -> CallToolResult:
        answer = kb.call_tool(arguments, caller="mcp", tool=name)
        if answer.error:
            raise ToolError(answer.error)  # an error result: isError, the message as its text
        text = json.dumps(answer.payload, ensure_ascii=False, indent=2)
        # structuredContent is the payload itself (the SDK validates it against the output schema first)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=answer.payload)

    Arguments.__name__ = Arguments.__qualname__ = f"{name}Arguments"
    return Tool(fn=call, name=name, description=description, parameters=input_schema, is_async=False,
                fn_metadata=FuncMetadata(arg_model=Arguments, output_model=response))


def main(argv: list[str] | None = None, *, prog: str = "python -m kb_core.mcp") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    parser.add_argument("--log-level", default="INFO", help="logging level on stderr (default INFO)")
    args = parser.parse_args(argv)
    # stdout carries the MCP protocol on stdio: every log line goes to stderr.
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import KnowledgeBaseError

    try:
        kb = open_knowledge_base()
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = build_server(kb)
    try:
        if args.http:
            log.info("serving %s, %s on http://127.0.0.1:%d/mcp", TOOL_NAME, READ_TOOL_NAME, args.port)
            server.run("streamable-http", host="127.0.0.1", port=args.port)
        else:
            server.run("stdio")
    finally:
        kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

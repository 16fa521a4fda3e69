"""MCP server for agents: `python -m kb_core.mcp` serves `lookup_knowledge` over stdio, or with `--http` over
streamable HTTP on 127.0.0.1. It opens the knowledge base from the same settings as the console.

It runs beside the console and other agent processes on the same settings: they share the Milvus Lite
directory (the first to open it serves it to the others) and follow each other's writes through the change feed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Annotated, Any

from pydantic import Field

from kb_core.agent.tool import MAX_QUERY_CHARS, SECTION_TITLE_DESCRIPTION, TOOL_DESCRIPTION, TOOL_NAME
from kb_core.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

SERVER_NAME = "knowledge-base"


def build_server(kb: KnowledgeBase) -> Any:
    """An `MCPServer` exposing `lookup_knowledge` bound to `kb` (calls are logged with caller "mcp")."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(
        name=SERVER_NAME,
        instructions="Use lookup_knowledge for error codes, API names and known terms before guessing.",
    )

    def lookup_knowledge(
        query: Annotated[str, Field(description="What to look up: an error code, API name, term or short "
                                                f"question (at most {MAX_QUERY_CHARS} characters).")],
        section_title: Annotated[str | None, Field(description=SECTION_TITLE_DESCRIPTION)] = None,
    ) -> dict[str, Any]:
        response = kb.call_tool({"query": query, "section_title": section_title}, caller="mcp")
        if response.error:
            raise ToolError(response.error)
        return response.payload

    server.add_tool(lookup_knowledge, name=TOOL_NAME, description=TOOL_DESCRIPTION)
    return server


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
            log.info("serving %s on http://127.0.0.1:%d/mcp", TOOL_NAME, args.port)
            server.run("streamable-http", host="127.0.0.1", port=args.port)
        else:
            server.run("stdio")
    finally:
        kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m kb_core.mcp`: the MCP server entry point (the server itself is `kb_core.agent.mcp_server`)."""

import sys

from kb_core.agent.mcp_server import build_server, main

__all__ = ["build_server", "main"]

if __name__ == "__main__":
    sys.exit(main())

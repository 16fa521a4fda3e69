"""Agent: `lookup_knowledge` for agents.

Owns the tool (`tool`: function, JSON schema, argument checks, background call log), summaries of the
call log (`call_stats`) and the MCP server (`mcp_server`; `python -m kb_core.mcp` runs it).

May import: kb_core's base modules, `kb_core.retrieval` (the lookup it wraps) and the `KnowledgeBase`
facade (the MCP server serves one).
"""

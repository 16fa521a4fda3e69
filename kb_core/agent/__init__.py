"""Agent: the agents' tools, `lookup_knowledge` and `read_document`.

Owns the tools (`tool`: functions, JSON schemas, argument checks, background call log), their answers as
pydantic models (`response`), summaries of the call log (`call_stats`) and the MCP server (`mcp_server`;
`python -m kb_core.mcp` runs it).

May import: kb_core's base modules, `kb_core.retrieval` (the lookup it wraps) and the `KnowledgeBase`
facade (the MCP server serves one).
"""

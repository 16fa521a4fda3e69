"""Agent: the agents' tools, `lookup_knowledge` and `read_document`.

Owns the tools (`tool`: functions, JSON schemas, argument checks, background call log), their answers as
pydantic models (`response`), summaries of the call log (`call_stats`), the MCP server (`mcp_server`;
`python -m kb_core.mcp` runs it) and the answer from L0 alone for one-question processes (`quick`).

May import: kb_core's base modules, `kb_core.storage` (the call spool), `kb_core.documents` (the folder L0
reads), `kb_core.retrieval` (the lookup it wraps) and the `KnowledgeBase` facade (the MCP server serves one).
"""

"""Agent: the agents' tools, `lookup_knowledge` and `read_document`, below the `KnowledgeBase` facade.

Owns the tools (`tool`: functions, JSON schemas, argument checks, background call log), their answers as
pydantic models (`response`), summaries of the call log (`call_stats`), the MCP server's share of sessions per
token (`mcp_sessions`) and the answer from L0 alone for one-question processes (`quick`). The MCP server itself
serves a facade and lives above it, in `kb_core.mcp`.

May import: kb_core's base modules, `kb_core.ops` (logs, the percentile), `kb_core.storage` (the call spool),
`kb_core.documents` (the folder L0 reads) and `kb_core.retrieval` (the lookup it wraps); never the facade, the
composition root or the commands above them (`tests/unit/test_architecture.py`, `IMPORT_RULES`).
"""

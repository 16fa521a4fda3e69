"""Storage: the adapters to the outside world and the ports the services see them through.

Owns `ports` (the `Protocol`s `MetadataRepository`, `ChunkStore`, `Embedder` and the chunk values), the
SQL metadata store (`db_models`, `metadata_store`, `tool_call_log`, `query_history`, `evaluation_store`, Alembic
`migrations`; the `call_spool` of calls answered without the database), the Milvus chunk store (`vector_store`)
and the FlagEmbedding models (`embedding`), and the `kb migrate` command (`migrate`).

May import: kb_core's base modules only (`errors`, `terms`, `progress`, `access`, `settings`) and `kb_core.ops`
(the percentile the call-log summaries use). Nothing here knows about
documents, lookups or agents; heavy libraries (pymilvus, FlagEmbedding, torch) are imported lazily.
"""

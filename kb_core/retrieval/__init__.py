"""Retrieval: answering a query.

Owns L1 (`l1_search`: BM25
+ dense search over chunks with a relevance check), the L0 -> L1 decision with its result and trace types
(`lookup`), serving one document as an answer's primary, head or section (`reading`: the lookup's primary
and the `read_document` tool), and the console's retrieval test bench (`trial`: L1's rows under options agents
cannot set, beside the agents' own answer).

May import: kb_core's base modules, `kb_core.ops` (the log context), `kb_core.keywords` (L0), `kb_core.documents` and
`kb_core.storage.ports` (L1 talks to a `ChunkStore` and an `Embedder`, never to Milvus directly).
"""

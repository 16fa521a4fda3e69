"""What a user's own tests need beside `open_knowledge_base(Settings(...))` on a temporary folder:
`milvus_server.milvus_lite_server`, a `milvus-lite server` on a free port for tests with several processes."""

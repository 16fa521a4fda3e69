"""How rare a query's terms are, read from the SQLite FTS5 vocabulary (the off-topic check weights by it)."""

from __future__ import annotations

from kb_core.storage.fulltext_sqlite import SqliteFullTextIndex
from kb_core.storage.ports import ChunkRow


def row(doc_id: int, no: int, text: str) -> ChunkRow:
    return ChunkRow(doc_id, f"knowledge_base/g/{doc_id}.md", "g", no, "", text)


def test_counts_chunks_per_term_and_follows_writes_of_this_and_other_connections(tmp_path):
    path = tmp_path / "fts.db"
    index = SqliteFullTextIndex(path)
    index.upsert([row(1, 0, "配置 插件 超时"), row(1, 1, "插件 重试"), row(2, 0, "plugin retries plugin")])
    counts, total = index.document_frequencies(["插件", "plugin", "红烧肉", "超时"])
    assert total == 3 and counts == {"插件": 2, "plugin": 1, "超时": 1}  # a chunk counts once; absent: left out
    index.upsert([row(3, 0, "插件")])  # this process writes: cached counts are dropped
    assert index.document_frequencies(["插件"]) == ({"插件": 3}, 4)
    other = SqliteFullTextIndex(path)  # another process's connection to the same file
    try:
        other.delete_document(1)
        assert index.document_frequencies(["插件", "超时"]) == ({"插件": 1}, 2)
    finally:
        other.close()
        index.close()

"""BM25 lives in one place: beside a full-text index a Milvus collection computes none of its own.

Milvus Lite's BM25 function tokenised every inserted chunk with Python jieba inside this process: a third of a
reconcile's time, for a sparse field nothing searched. And the full-text index's own tokens come from jieba-rs
now, so an index of Python jieba's tokens is made again when it is opened.
"""

from __future__ import annotations

import sqlite3

import jieba
import pytest

from kb_core.storage.fulltext_sqlite import _PIECE, STOP_WORDS, SqliteFullTextIndex, tokenize
from kb_core.storage.ports import ChunkRow
from kb_core.storage.vector_store import MilvusVectorStore, VectorStoreError

# product-documentation sentences of ours, both languages, identifiers and versions among them
SENTENCES = [
    "如何配置网关的超时时间？默认值为 30 秒，可以在 conf/config.yaml 中修改 proxy_read_timeout。",
    "GreptimeDB 集群由 metasrv、frontend 和 datanode 组成，每个组件都可以独立扩容。",
    "Use the key-auth plugin to authenticate consumers; the header name is X-API-KEY by default.",
    "升级到 v1.2.3 之前，请先备份元数据，并确认磁盘剩余容量大于 20%。",
    "The retention policy removes data older than 7d; set ttl = '30d' on the table to keep it longer.",
    "告警规则支持阈值、持续时间和通知渠道三种配置项，通知渠道包括邮件、钉钉和飞书。",
]


def _python_jieba(text: str) -> list[str]:
    """The tokens as they were made with Python jieba before jieba-rs, in unicode61's pieces."""
    out = []
    for token in jieba.cut_for_search(text):
        out += [p for p in _PIECE.findall(token.strip().lower()) if p not in STOP_WORDS]
    return out


@pytest.mark.parametrize("text", SENTENCES)
def test_the_tokens_are_python_jiebas_segmentation(text):
    assert tokenize(text) == _python_jieba(text)


def test_ascii_words_are_not_split_into_dictionary_sub_words():
    # jieba-rs's cut_for_search alone gave `table`, `name` besides `table_name` (counted twice by FTS5)
    assert tokenize("SELECT table_name FROM information_schema") == ["select", "table", "name", "information", "schema"]


def _row(doc_id: int, chunk_no: int, text: str) -> ChunkRow:
    return ChunkRow(doc_id=doc_id, source=f"knowledge_base/ops/page-{doc_id}.md", category="ops",
                    chunk_no=chunk_no, heading="Timeouts", text=text)


def test_an_index_of_older_tokens_is_made_again_when_opened(tmp_path):
    path = tmp_path / "fulltext.sqlite3"
    index = SqliteFullTextIndex(path)
    index.upsert([_row(1, 0, SENTENCES[0]), _row(2, 0, SENTENCES[2])])
    index.close()
    con = sqlite3.connect(path)  # as an index of the older tokenizer left it
    con.execute("UPDATE chunks SET tokens = 'stale'")
    con.execute("PRAGMA user_version = 0")
    con.commit()
    con.close()
    index = SqliteFullTextIndex(path)
    try:
        assert [c.row.doc_id for c in index.search("proxy_read_timeout 超时", 5)] == [1]
        assert index.search("stale", 5) == []
        assert [c.row.doc_id for c in index.search("key-auth consumers", 5)] == [2]
    finally:
        index.close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] >= 1
    con.close()


def _functions(store: MilvusVectorStore) -> list:
    return store.client().describe_collection(store.collection).get("functions") or []


def test_a_collection_beside_a_full_text_index_computes_no_bm25(tmp_path):
    fulltext = SqliteFullTextIndex(tmp_path / "m.fulltext.sqlite3")
    store = MilvusVectorStore(str(tmp_path / "m.db"), collection="chunks", dense_dim=None, fulltext=fulltext)
    try:
        store.upsert([_row(1, 0, SENTENCES[0]), _row(2, 0, SENTENCES[2])])
        assert _functions(store) == []
        assert store.count_chunks() == 2
        assert [c.row.doc_id for c in store.search_bm25("网关 超时", limit=3)] == [1]
        assert {c.chunk_no for c in store.chunks_of(2)} == {0}
    finally:
        store.close()
    # the same collection without the full-text index cannot search BM25: it says why instead of failing oddly
    bare = MilvusVectorStore(str(tmp_path / "m.db"), collection="chunks", dense_dim=None)
    try:
        with pytest.raises(VectorStoreError, match="KB_FULLTEXT"):
            bare.search_bm25("网关 超时", limit=3)
    finally:
        bare.close()


def test_a_collection_made_with_milvus_bm25_keeps_working_beside_a_full_text_index(tmp_path):
    old = MilvusVectorStore(str(tmp_path / "m.db"), collection="chunks", dense_dim=None)
    try:
        old.upsert([_row(1, 0, SENTENCES[0])])
        assert _functions(old)  # Milvus' own BM25, as every collection made before BM25 was kept in one place
    finally:
        old.close()
    fulltext = SqliteFullTextIndex(tmp_path / "m.fulltext.sqlite3")
    store = MilvusVectorStore(str(tmp_path / "m.db"), collection="chunks", dense_dim=None, fulltext=fulltext)
    try:
        store.upsert([_row(2, 0, SENTENCES[2])])  # no placeholder `sparse` for a function's output field
        assert store.count_chunks() == 2
        assert [c.row.doc_id for c in store.search_bm25("key-auth consumers", limit=3)] == [2]
    finally:
        store.close()

"""Nested categories in Milvus: a new collection keeps a category path of up to 255 characters; a
collection made before nested categories keeps 64, and a category filter still finds exactly that folder's
chunks there. Real Milvus Lite, Milvus' own BM25 (the filter path the server setups use)."""

from __future__ import annotations

import pytest

from kb_core.documents.path_rule import MAX_CATEGORY_CHARS
from kb_core.storage import vector_store
from kb_core.storage.ports import ChunkRow
from kb_core.storage.vector_store import MilvusVectorStore

DEEP = "vendor-docs/platform/en/latest/" + "/".join(f"section-{i:02d}" for i in range(12))  # 162 characters
SIBLING = DEEP[:-2] + "99"  # the same first 148 characters, another folder


def _row(doc_id: int, category: str, text: str) -> ChunkRow:
    return ChunkRow(doc_id=doc_id, source=f"knowledge_base/{category}/page-{doc_id}.md", category=category,
                    chunk_no=0, heading="Rate limits", text=text)


def _store(tmp_path) -> MilvusVectorStore:
    return MilvusVectorStore(str(tmp_path / "m.db"), collection="chunks", dense_dim=None)


def _filled(store: MilvusVectorStore) -> MilvusVectorStore:
    store.upsert([_row(1, DEEP, "the gateway limits requests per consumer"),
                  _row(2, SIBLING, "the gateway limits requests per route"),
                  _row(3, "api", "the gateway limits requests per service")])
    return store


def test_the_category_limit_is_the_folder_rule_s():
    assert vector_store.CATEGORY_CHARS == MAX_CATEGORY_CHARS
    assert len(DEEP) > vector_store.LEGACY_CATEGORY_CHARS


def test_a_new_collection_keeps_the_whole_category_path(tmp_path):
    store = _filled(_store(tmp_path))
    try:
        assert store.category_chars == MAX_CATEGORY_CHARS
        assert {c.category for c in store.chunks_of(1)} == {DEEP}
        hits = store.search_bm25("gateway limits requests", limit=5, category=DEEP)
        assert [h.row.doc_id for h in hits] == [1]
    finally:
        store.close()


def test_a_collection_from_before_nested_categories_still_filters_exactly(tmp_path, monkeypatch):
    with monkeypatch.context() as old_code:  # the collection is made as the code before nested categories made it
        old_code.setattr(vector_store, "CATEGORY_CHARS", vector_store.LEGACY_CATEGORY_CHARS)
        made = _store(tmp_path)
        made.client()
        made.close()
    store = _filled(_store(tmp_path))
    try:
        assert store.category_chars == vector_store.LEGACY_CATEGORY_CHARS
        assert {c.category for c in store.chunks_of(1)} == {DEEP[:vector_store.LEGACY_CATEGORY_CHARS]}
        for folder, expected in ((DEEP, [1]), (SIBLING, [2]), ("api", [3])):
            hits = store.search_bm25("gateway limits requests", limit=5, category=folder)
            assert [h.row.doc_id for h in hits] == expected, folder
    finally:
        store.close()


@pytest.mark.parametrize("folder", ["", None])
def test_no_category_searches_everything(tmp_path, folder):
    store = _filled(_store(tmp_path))
    try:
        assert sorted(h.row.doc_id for h in store.search_bm25("gateway limits", limit=5, category=folder)) == [1, 2, 3]
    finally:
        store.close()

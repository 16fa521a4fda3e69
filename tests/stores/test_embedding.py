"""Embeddings through the real FlagEmbedding loading code, on models built or shipped locally."""

from __future__ import annotations

import logging
import math

import pytest
from support.stores import NO_MODEL, assert_consistent

from kb_core.bootstrap import parts_of
from kb_core.storage.embedding import EmbeddingError, FlagEmbedder


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_tiny_bge_m3_loads_through_bgem3flagmodel(tiny_model):
    embedder = FlagEmbedder(str(tiny_model), device="cpu")
    assert embedder.available and embedder.dimension == 32
    state = embedder.wait_ready(120)
    assert state.ready, state.detail
    assert "BGE-M3" in state.detail
    [q] = embedder.encode_queries(["如何优化缓存"])
    docs = embedder.encode_documents(["缓存穿透的优化", "ERR_TIMEOUT 超时"])
    assert len(q) == 32 and len(docs) == 2
    assert abs(math.sqrt(sum(x * x for x in q)) - 1) < 1e-4  # normalised


def test_loading_happens_in_the_background(tiny_model):
    embedder = FlagEmbedder(str(tiny_model), device="cpu")
    assert embedder.state.state == "loading"  # constructing loads nothing
    embedder.start_loading()
    assert embedder.wait_ready(120).ready


def test_unavailable_model_says_so_once_and_refuses_to_invent_vectors(caplog):
    with caplog.at_level(logging.WARNING, logger="kb_core.storage.embedding"):
        embedder = FlagEmbedder("BAAI/bge-m3-not-cached-here")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "full text" in warnings[0].getMessage()
    assert embedder.state.state == "unavailable" and not embedder.available
    with pytest.raises(EmbeddingError, match="unavailable"):
        embedder.encode_queries(["x"])


def test_broken_model_folder_degrades_to_unavailable(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    embedder = FlagEmbedder(str(tmp_path), device="cpu")
    state = embedder.wait_ready(120)
    assert state.state == "unavailable" and "failed to load" in state.detail


def test_query_embeddings_are_cached(tiny_model):
    embedder = FlagEmbedder(str(tiny_model), device="cpu", query_cache_size=2)
    first = embedder.encode_queries(["超时"])
    assert embedder.encode_queries(["超时"]) == first
    assert embedder.cache_stats == (1, 1)
    embedder.encode_queries(["a", "b"])  # evicts "超时"
    embedder.encode_queries(["超时"])
    assert embedder.cache_stats[1] == 4


def test_knowledge_base_opens_without_waiting_for_the_model(tmp_path, tiny_model):
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(tmp_path, model=str(tiny_model)))
    try:
        assert kb.status().model.state in ("loading", "ready")
        assert kb.lookup("anything").trace.l1_called  # L1 (BM25) serves while the model loads
    finally:
        kb.close()


def test_without_a_model_l1_is_full_text_only(open_kb):
    kb = open_kb(model=NO_MODEL)
    status = kb.status()
    assert status.model.state == "unavailable" and not status.dense_search
    assert status.l1_mode == "L1 runs on full text only (BM25)"
    text = "---\ntitle: 缓存\nkeywords: [Redis]\nsummary: s\n---\n# 缓存优化\n\n如何优化缓存命中率\n"
    kb.documents.upload("cache.md", text.encode(), "domain")
    hit = kb.lookup("如何优化缓存").trace.l1_hits[0]
    assert hit.retrievers == ("bm25",)
    assert_consistent(kb)


# -- real semantics: MiniLM weights and the Chinese BM25 path -------------------------------------------------
def test_minilm_paraphrase_finds_the_right_chunk_by_dense_similarity(open_kb, sample_root):
    from kb_core.testing import minilm_path

    kb = open_kb(sample_root, model=str(minilm_path()))
    assert kb.status().model.ready
    kb.documents.reconcile()
    result = kb.lookup("reimburse a customer")  # no word in common with the refund document
    assert result.primary is None
    assert result.supplement.source == "knowledge_base/api/refund-api.md"
    top = result.trace.l1_hits[0]
    assert top.retrievers == ("dense",)
    assert dict(top.retriever_scores)["dense"] >= 0.4


def test_minilm_vectors_are_semantic(tmp_path):
    from kb_core.testing import minilm_path

    embedder = FlagEmbedder(str(minilm_path()), device="cpu")
    q, same, other = embedder.encode_documents(["How do I refund a payment?",
                                                "Issue a partial refund through the Refund API",
                                                "JVM heap dump analysis"])
    assert _cos(q, same) > _cos(q, other) + 0.3


def test_req_7_2_2_chinese_open_question_finds_the_cache_document_through_bm25(open_kb, sample_root):
    kb = open_kb(sample_root, model=NO_MODEL)
    kb.documents.reconcile()
    result = kb.lookup("如何优化缓存")
    assert result.primary is None  # no keyword matches: this is an L1 answer
    assert result.supplement.source == "knowledge_base/domain/cache-optimization.md"
    assert result.to_dict()["supplement"]["matchType"] == "semantic_L1"
    assert "bm25" in result.trace.l1_hits[0].retrievers


def test_req_5_4_nonsense_finds_nothing_on_the_sample(open_kb, sample_root):
    kb = open_kb(sample_root, model=NO_MODEL)
    kb.documents.reconcile()
    assert kb.lookup("完全不存在的内容XYZ").to_dict() == {"found": False, "primary": None, "supplement": None}


def test_req_6_3_opening_with_1000_documents_indexes_all_of_them(tmp_path):
    """The spec's time budget for the scan at start is measured by the benchmark (tests check behaviour, not timers)."""
    from support.documents import doc, write_doc
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base

    for i in range(1000):
        write_doc(tmp_path, f"knowledge_base/c{i % 3}/doc-{i:04d}.md", doc(f"Doc {i}", [f"KW_{i}"], body="x " * 500))
    kb = open_knowledge_base(make_settings(tmp_path, model=NO_MODEL))
    try:
        assert len(parts_of(kb).index) == 1000
        # "KW_999" contains KW_9 and KW_99 only inside a longer word: the word rule returns KW_999 alone
        assert [e.title for e in parts_of(kb).index.exact_match("KW_999")] == ["Doc 999"]
        assert [e.title for e in parts_of(kb).index.exact_match("kw_99 and kw_9")] == ["Doc 9", "Doc 99"]
    finally:
        kb.close()


@pytest.mark.parametrize(("precision", "floor"), [("fp32", 0.99999), ("bf16", 0.999)])
def test_fast_encoder_matches_flagembedding_reference(precision, floor):
    """Our encode path (one forward per batch, no probe pass) gives FlagEmbedding's vectors on real weights."""
    from kb_core.testing import minilm_path

    embedder = FlagEmbedder(str(minilm_path()), device="cpu", precision=precision)
    texts = ["如何优化缓存", "ERR_TIMEOUT 超时 支付网关 " * 30, "Refund API partial refund", "x"]
    ours = embedder.encode_documents(texts)
    reference = embedder.reference_encode(texts, query=False)
    assert min(_cos(a, b) for a, b in zip(ours, reference, strict=True)) >= floor


def test_invalid_precision_is_refused():
    with pytest.raises(EmbeddingError, match="KB_EMBEDDING_PRECISION"):
        FlagEmbedder("x/y", precision="int4")


def test_repeated_queries_in_one_call_get_their_own_vectors(tiny_model):
    embedder = FlagEmbedder(str(tiny_model), device="cpu")
    a, b = embedder.encode_queries(["超时", "缓存"])
    fresh = FlagEmbedder(str(tiny_model), device="cpu")
    assert fresh.encode_queries(["超时", "超时", "缓存"]) == [a, a, b]

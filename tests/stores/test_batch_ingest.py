"""Reconcile indexes new files in batches: one intent transaction, one chunk write and one settling
transaction per batch; a file the batch cannot take, a failed batch and a writer killed mid-batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.documents import doc, write_doc
from support.stores import NO_MODEL, assert_consistent, make_settings

from kb_core.bootstrap import open_knowledge_base, parts_of
from kb_core.documents.reconcile import BATCH
from kb_core.storage.vector_store import MilvusVectorStore


def _pages(root: Path, n: int) -> None:
    for i in range(n):
        body = f"# Relay {i}\n\n## Restart\n\nRelay {i} restarts after {i % 7 + 2} missed heartbeats.\n"
        write_doc(root, f"knowledge_base/ops/relay-{i:03d}.md", doc(f"Relay {i}", [f"RELAY_{i:03d}"], body=body))


def _spy(monkeypatch, cls, name: str) -> list[int]:
    sizes: list[int] = []
    original = getattr(cls, name)

    def spied(self, rows, *args, **kwargs):
        sizes.append(len(rows))
        return original(self, rows, *args, **kwargs)

    monkeypatch.setattr(cls, name, spied)
    return sizes


def test_new_files_are_indexed_in_batches_and_every_store_agrees(tmp_path, monkeypatch):
    n = 2 * BATCH + 5
    _pages(tmp_path, n)
    kb = open_knowledge_base(make_settings(tmp_path), load_model=False)
    try:
        upserts = _spy(monkeypatch, MilvusVectorStore, "upsert")
        report = kb.documents.reconcile()
        assert len(report.added) == n and not report.failed
        assert len(upserts) == 3  # one chunk write per batch, not one per file
        assert_consistent(kb)
        assert kb.lookup_knowledge("RELAY_130")["primary"]["source"] == "knowledge_base/ops/relay-130.md"
        changes = parts_of(kb).metadata.changes_since(0)[0]
        assert len([c for c in changes if c.operation == "upsert"]) == n  # the change feed has every file
    finally:
        kb.close()


def test_a_few_new_files_go_one_by_one(tmp_path, monkeypatch):
    _pages(tmp_path, BATCH - 1)
    kb = open_knowledge_base(make_settings(tmp_path), load_model=False)
    try:
        upserts = _spy(monkeypatch, MilvusVectorStore, "upsert")
        assert len(kb.documents.reconcile().added) == BATCH - 1
        assert len(upserts) == BATCH - 1  # a cancel stops at the next file, as for changed files
    finally:
        kb.close()


def test_a_file_the_batch_cannot_take_is_indexed_or_reported_on_its_own(tmp_path):
    _pages(tmp_path, BATCH + 5)
    (tmp_path / "knowledge_base" / "ops" / "broken.md").write_bytes(b"---\ntitle: Broken\n---\n\xff\xfe\x00 bad")
    kb = open_knowledge_base(make_settings(tmp_path), load_model=False)
    try:
        report = kb.documents.reconcile()
        assert len(report.added) == BATCH + 5
        assert [p for p, _ in report.failed] == ["knowledge_base/ops/broken.md"]
        assert "looks binary" in report.failed[0][1], report.failed  # the single path's own message
    finally:
        kb.close()


def test_a_batch_whose_chunk_write_fails_is_undone_then_indexed_one_by_one(tmp_path, monkeypatch, caplog):
    _pages(tmp_path, BATCH + 12)
    kb = open_knowledge_base(make_settings(tmp_path), load_model=False)
    try:
        original = MilvusVectorStore.upsert
        failed_once: list[int] = []

        def flaky(self, rows):
            if len({r.doc_id for r in rows}) > 1 and not failed_once:
                failed_once.append(len(rows))
                original(self, rows[: len(rows) // 2])  # half written, then the write fails
                raise RuntimeError("the chunk write broke half-way")
            return original(self, rows)

        monkeypatch.setattr(MilvusVectorStore, "upsert", flaky)
        report = kb.documents.reconcile()
        assert failed_once and len(report.added) == BATCH + 12 and not report.failed
        assert "undoing it, then one by one" in caplog.text
        assert_consistent(kb)
    finally:
        kb.close()


_KILLED_CHILD = """
import os, signal, sys
from kb_core.bootstrap import open_knowledge_base
from kb_core.settings import load_settings
from kb_core.storage.metadata_store import MetadataStore
step = sys.argv[2]
if step == "rows":  # the rows are PENDING and the chunks written: killed before they are settled
    MetadataStore.finish_writes = lambda self, done: os.kill(os.getpid(), signal.SIGKILL)
else:  # killed after the settling commit, before L0 heard of them
    real = MetadataStore.finish_writes
    def finish_then_die(self, done):
        real(self, done)
        os.kill(os.getpid(), signal.SIGKILL)
    MetadataStore.finish_writes = finish_then_die
kb = open_knowledge_base(load_settings(app_root=sys.argv[1]), load_model=False)
kb.documents.reconcile()
print("not killed")
"""


@pytest.mark.processes
@pytest.mark.parametrize("step", ["rows", "settled"])
def test_a_writer_killed_mid_batch_leaves_what_the_next_opening_settles(tmp_path, step):
    _pages(tmp_path, BATCH + 6)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_") or k == "KB_L0_SNAPSHOT_KEY_FILE"}
    env.update(KB_DATABASE_URL=f"sqlite:///{tmp_path / 'kb.sqlite3'}", KB_MILVUS_URI=str(tmp_path / "kb_milvus.db"),
               KB_EMBEDDING_MODEL=NO_MODEL, KB_EMBEDDING_FALLBACK="none", KB_WATCH="false")
    done = subprocess.run([sys.executable, "-c", _KILLED_CHILD, str(tmp_path), step], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr[-2000:])
    kb = open_knowledge_base(make_settings(tmp_path), load_model=False)  # recovery runs at the opening
    try:
        rows = parts_of(kb).metadata.list_documents()
        assert [r.file_path for r in rows if r.pending_operation] == [], "recovery left rows pending"
        report = kb.documents.reconcile()
        assert not report.failed
        assert_consistent(kb)
        assert len(parts_of(kb).metadata.list_documents()) == BATCH + 6
        assert json.loads(json.dumps(kb.lookup_knowledge("RELAY_007")))["primary"]["confidence"] == "high"
    finally:
        kb.close()


class _CountingEmbedder:
    """A deterministic 16-d embedder that records each `encode_documents` call's size (real stores; only the
    model is fake)."""

    model_id = "test/counting-16"
    dimension = 16
    available = True

    def __init__(self):
        from kb_core.storage.ports import ModelState

        self.calls: list[int] = []
        self.state = ModelState("ready", self.model_id, "test")

    def wait_ready(self, timeout=None):
        return self.state

    def start_loading(self):
        pass

    @staticmethod
    def vector(text: str) -> list[float]:
        import hashlib

        raw = [b - 127.5 for b in hashlib.sha256(text.encode()).digest()[:16]]
        norm = sum(x * x for x in raw) ** 0.5
        return [x / norm for x in raw]

    def encode_queries(self, texts):
        return [self.vector(t) for t in texts]

    def encode_documents(self, texts, progress=None):
        self.calls.append(len(texts))
        return [self.vector(t) for t in texts]


def test_a_batch_is_embedded_in_one_call_and_each_chunk_gets_its_own_vector(tmp_path):
    """The model sees a whole batch's passages at once (its own batches fill up), and the vectors land on the
    chunks they were computed for."""
    n = BATCH + 3
    _pages(tmp_path, n)
    embedder = _CountingEmbedder()
    kb = open_knowledge_base(make_settings(tmp_path), embedder=embedder)
    try:
        report = kb.documents.reconcile()
        assert len(report.added) == n and not report.failed
        rows = kb.documents.list()
        assert {d.embedding_model for d in rows} == {embedder.model_id}
        assert embedder.calls == [sum(d.chunk_count for d in rows if d.file_path.endswith(tuple(
            f"relay-{i:03d}.md" for i in range(BATCH)))), sum(d.chunk_count for d in rows) - embedder.calls[0]]
        for row in rows[:: 17]:
            chunks = parts_of(kb).vectors.chunks_of(row.id, with_vectors=True)
            assert chunks and all(c.dense == pytest.approx(embedder.vector(c.text)) for c in chunks), row.file_path
        assert_consistent(kb)
    finally:
        kb.close()

"""The benchmark runs (a smoke run at N=50; real runs stay out of the test suite)."""

from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path

import pytest
from naive_l0 import NaiveIndex

from benchmarks.bench import L1_CLASSES, bench_lookups, chunk_rows, l1_chunks, l1_documents, l1_queries, main
from benchmarks.common import bench_settings, generate_corpus, query_mix
from kb_core import KnowledgeIndex, open_knowledge_base
from kb_core.documents.chunking import FRONTMATTER_HEADING

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.slow
@pytest.mark.processes
def test_quick_bench_prints_a_table_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KB_EMBEDDING_MODEL", "no-such-org/no-such-model")
    out = tmp_path / "bench.json"
    assert main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| documents | keywords |" in printed and "lookup() end to end" in printed
    report = json.loads(out.read_text())
    assert report["command"] == f"python -m benchmarks --quick --json {out}"
    [l0] = report["l0"]
    assert l0["documents"] == 50 and l0["exact_match"]["n"] > 0
    [(label, lookups)] = report["lookups"].items()
    assert label == "configured (no-such-org/no-such-model)" and "full text" in lookups["l1_mode"]
    assert lookups["L0-unique"]["model_calls"] == 0
    assert lookups["L0-miss"]["n"] > 0 and lookups["L0-multi"]["n"] == 5
    # L1 full text: the same chunks in Milvus BM25 and in FTS5, every query class timed on both
    assert "L1 full text" in printed and "| class | Milvus BM25 p50 / p99 | FTS5 p50 / p99 |" in printed
    l1 = report["l1"]
    assert 400 <= l1["chunks"] < 500 and l1["queries_per_class"] == 10
    assert set(l1["classes"]) == {"short", "Chinese sentence", "English sentence", "long"}
    for row in [*l1["classes"].values(), l1["all"]]:
        assert row["milvus_bm25"]["n"] == row["fts5"]["n"] > 0 and row["speedup_p99"] > 0
    assert l1["all"]["fts5"]["n"] == 40
    assert l1["all"]["fts5"]["found"] > 0.5 and l1["all"]["milvus_bm25"]["found"] > 0.5
    assert set(l1["build_s"]) == {"milvus_bm25", "fts5"}
    # every console page rendered through AppTest, warm and right after a write (every summary recomputed)
    assert "| page | first render |" in printed and "right after a write" in printed
    pages = report["pages"]
    assert pages["documents"] == 50 and set(pages["pages"]) == {"playground", "documents", "upload", "tool_calls"}
    assert pages["uncached_by"] == "write" and pages["runs"] == 2
    assert all(p["median_s"] > 0 and p["uncached_median_s"] > 0 for p in pages["pages"].values())


@pytest.mark.slow
def test_lookups_run_through_the_knowledge_base_with_the_timed_query_encoder(tmp_path, tiny_model):
    """The lookup runs open a knowledge base with the benchmark's embedder: documents get random vectors, queries
    the encoder being timed; L0-unique answers never call it, misses do (hybrid L1)."""
    results = bench_lookups(tmp_path, docs=12, queries=4, bge_path=tiny_model, configured_model="unused",
                            variants=["flagembedding-fp32", "kb-fp32"])
    assert list(results) == ["BGE-M3-shaped, FlagEmbedding encode_queries fp32", "BGE-M3-shaped, kb_core encoder fp32"]
    for row in results.values():
        assert "hybrid" in row["l1_mode"], row
        assert row["L0-unique"]["n"] == 4 and row["L0-unique"]["model_calls"] == 0
        assert row["L0-miss"]["n"] > 0 and row["L0-miss"]["model_calls"] == row["L0-miss"]["n"]  # L1 is hybrid
        assert row["query_cache_hit"]["n"] == 50


def test_l1_chunks_are_what_an_upload_stores(tmp_path):
    category, name, text = next(l1_documents())
    rows = chunk_rows(1, category, name, text)
    assert rows == [r for r in l1_chunks(1) if r.doc_id == 1]
    kb = open_knowledge_base(bench_settings(tmp_path), load_model=False)
    try:
        outcome = kb.upload(name, text.encode(), category)
        stored = kb.chunks(outcome.document.id)
    finally:
        kb.close()
    assert outcome.document.file_path == rows[0].source
    assert [(r.chunk_no, r.heading, r.text) for r in stored] == [(r.chunk_no, r.heading, r.text) for r in rows]


def test_l1_corpus_is_deterministic_real_sized_and_the_queries_come_from_it():
    rows = l1_chunks(300)
    assert rows == l1_chunks(300)
    assert len(rows) >= 300 and (rows[0].chunk_no, rows[0].heading) == (0, FRONTMATTER_HEADING)  # as uploads are
    assert 300 <= statistics.mean(len(r.text) for r in rows) <= 900
    assert any("```" in r.text for r in rows) and any("|---|" in r.text for r in rows)
    assert any(re.search(r"[\u4e00-\u9fff]", r.text) and re.search(r"[A-Za-z]{4}", r.text) for r in rows)
    queries = l1_queries(rows, 20)
    assert {k: len(v) for k, v in queries.items()} == dict.fromkeys(L1_CLASSES, 20)
    assert all(len(q) >= 100 for q in queries["long"])
    assert all(re.fullmatch(r"[^A-Za-z]+", q) for q in queries["Chinese sentence"])


def test_generated_corpus_has_realistic_frontmatter_and_the_reference_agrees(tmp_path):
    corpus = generate_corpus(tmp_path, 60)
    assert all(3 <= len(k) <= 7 for k in corpus.keywords)
    sizes = [p.stat().st_size for p in (tmp_path / "knowledge_base").rglob("*.md")]
    assert len(sizes) == 60 and min(sizes) >= 2 * 1024 and max(sizes) <= 21 * 1024
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    assert index.load() == 60
    naive = NaiveIndex(index.entries(), index.matching)
    for queries in query_mix(corpus, count=20).values():
        for q in queries:
            assert index.exact_match(q) == naive.exact_match(q)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_benchmarks_import_each_other_in_one_direction_and_use_kb_cores_public_face():
    modules = {p.stem: _imports(p) for p in BENCHMARKS.glob("*.py")}
    assert "benchmarks.bench" not in modules["bench_pages"] and "benchmarks.bench" not in modules["common"]
    assert not any(m.startswith("benchmarks.") for m in modules["common"])
    for name, imported in modules.items():
        assert "kb_core.bench" not in imported and "kb_core.bootstrap" not in imported, name
    for path in BENCHMARKS.glob("*.py"):
        assert not re.search(r"\bkb\._", path.read_text(encoding="utf-8")), f"{path.name} reaches into a kb's internals"

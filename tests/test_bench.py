"""The benchmark runs (a smoke run at N=50; real runs stay out of the test suite)."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from kb_core.bench import L1_CLASSES, NaiveIndex, generate_corpus, l1_chunks, l1_queries, main, query_mix
from kb_core.documents.chunking import FRONTMATTER_HEADING
from kb_core.retrieval.keyword_index import KnowledgeIndex


@pytest.mark.slow
@pytest.mark.processes
def test_quick_bench_prints_a_table_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KB_EMBEDDING_MODEL", "no-such-org/no-such-model")
    out = tmp_path / "bench.json"
    assert main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| documents | keywords |" in printed and "lookup() end to end" in printed
    report = json.loads(out.read_text())
    [l0] = report["l0"]
    assert l0["documents"] == 50 and l0["exact_match"]["n"] > 0
    unique = next(iter(report["lookups"].values()))["L0-unique"]
    assert unique["model_calls"] == 0
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
    # every console page rendered through AppTest, with and without the summary cache
    assert "| page | first render |" in printed
    pages = report["pages"]
    assert pages["documents"] == 50 and set(pages["pages"]) == {"playground", "documents", "upload", "tool_calls"}
    assert all(p["median_s"] > 0 and p["uncached_median_s"] > 0 for p in pages["pages"].values())
    assert pages["cache"]["hits"] > 0


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

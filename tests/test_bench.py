"""The benchmark runs (a smoke run at N=50; real runs stay out of the test suite)."""

from __future__ import annotations

import json

from kb_core.bench import NaiveIndex, generate_corpus, main, query_mix
from kb_core.retrieval.keyword_index import KnowledgeIndex


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

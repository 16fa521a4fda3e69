"""The benchmark runs (a smoke run at N=50; real runs stay out of the test suite)."""

from __future__ import annotations

import ast
import json
import re
import statistics
import textwrap
from pathlib import Path

import pytest
from support.paths import REPO

import kb_core.console
import kb_core.testing
from benchmarks.bench import L1_CLASSES, bench_lookups, chunk_rows, l1_chunks, l1_documents, l1_queries, main
from benchmarks.bench_heavy import bench_heavy, render_heavy
from benchmarks.bench_l0_change import main as l0_change_main
from benchmarks.bench_suggest import bench_suggest, render_suggest
from benchmarks.bench_suggest import main as suggest_main
from benchmarks.bench_trees import generate_tree, tree_queries
from benchmarks.bench_trees import main as trees_main
from benchmarks.bench_zh import KINDS, VARIANTS, write_corpus, zh_documents, zh_queries
from benchmarks.common import bench_settings, generate_corpus, query_mix
from kb_core import KnowledgeIndex, open_knowledge_base
from kb_core.documents.chunking import FRONTMATTER_HEADING, MAX_CHUNKS
from kb_core.testing import NaiveIndex, upload_chunks

BENCHMARKS = REPO / "benchmarks"


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
    every_page = {p.stem for p in (REPO / "pages").glob("*.py")} - {"__init__"}
    assert pages["documents"] == 50 and set(pages["pages"]) == every_page  # every console page is timed
    assert pages["uncached_by"] == "write" and pages["runs"] == 2
    assert all(p["median_s"] > 0 and p["uncached_median_s"] > 0 for p in pages["pages"].values())
    # the trees section at its quick sizes: a 20-file tree reconciled, L0 with translation groups at 200 documents
    assert "Reconcile of a documentation tree" in printed
    assert report["trees"]["reconcile"]["documents"] == 17 and report["trees"]["l0_groups"]["documents"] == 200
    # did you mean at 200 documents
    assert "Did you mean" in printed and report["suggest"]["documents"] == 200
    # the Chinese-heavy knowledge base at 40 pages: both ways of the full-text search, every kind
    assert "Lookups that call L1 on a Chinese-heavy knowledge base" in printed
    zh = report["zh"]
    assert zh["documents"] == 40 and zh["chunks"] > 40 and set(zh["kinds"]) == set(KINDS)
    for kind in zh["kinds"].values():
        assert all(kind[v]["n"] == kind["queries"] > 0 and kind[v]["cpu"]["p99_ms"] > 0 for v in VARIANTS)
        assert 0 <= kind["same_answer"] <= 1 and kind[VARIANTS[0]]["stages"]["FTS5 query + rows"]["n"] > 0
    # heavy input at 256 KiB: the flat document of headings
    assert "Heavy but legal input" in printed and list(report["heavy"]["variants"]) == ["flat"]
    # opening a real-shaped tree of 200 pages, in this process and in fresh ones (L0 alone, the whole base)
    assert "Opening real-shaped trees" in printed
    [opened] = report["open"]["rows"]
    assert opened["documents"] == 200 and opened["shape"] == "fixture"
    assert all(opened[k] > 0 for k in ("full_scan_s", "snapshot_open_s", "fresh_process_l0_snapshot_s",
                                       "fresh_process_open_s", "fresh_process_full_scan_open_s"))


@pytest.mark.slow
@pytest.mark.processes
def test_the_heavy_input_bench_times_each_step_in_its_own_process(tmp_path):
    report = bench_heavy(tmp_path, variants=("flat", "nested"), limit=200 * 1024, timeout=300)
    for kind, headings in (("flat", 7000), ("nested", 9000)):
        row = report["variants"][kind]
        assert row["bytes"] <= 200 * 1024 and row["headings"] > headings
        upload, opened = row["after"]["upload"], row["after"]["open"]
        assert upload["upload_error"] is None and upload["chunks"] == MAX_CHUNKS + 1  # the frontmatter chunk
        assert opened["listed_sections"] == 51 and opened["section_early"]["served"]
        assert opened["section_late"]["served"] is None and opened["section_late"]["note"].startswith("no section")
        assert 0 < opened["l0_scan_s"] < 60 and opened["plain_lookup_s"] < 60
    assert report["small_open"]["after"]["long_query"].startswith("InvalidInputError: the query is 100,000")
    lines = render_heavy(report)
    assert lines[2].startswith("| document | code | preview | upload (extra MB) |") and len(lines) == 7


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
        outcome = kb.documents.upload(name, text.encode(), category)
        stored = kb.documents.chunks(outcome.document.id)
    finally:
        kb.close()
    assert outcome.document.file_path == rows[0].source
    assert [(r.chunk_no, r.heading, r.text) for r in stored] == [(r.chunk_no, r.heading, r.text) for r in rows]


def test_upload_chunks_are_what_an_upload_stores_for_every_shape_of_page(tmp_path):
    """`kb_core.testing.upload_chunks` (the rows a benchmark fills L1's stores with) for frontmatter that says
    nothing, frontmatter that does not parse, and a page that is only its heading."""
    pages = {"empty-front.md": "---\ntags: [x]\n---\n\n# Title\n\nSome text about ERR_X.\n",
             "broken-front.md": "---\ntitle: [unclosed\n---\n\n## A section\n\nBody text here.\n",
             "heading-only.md": "# Only a heading\n"}
    kb = open_knowledge_base(bench_settings(tmp_path), load_model=False)
    try:
        for name, text in pages.items():
            outcome = kb.documents.upload(name, text.encode(), "api")
            stored = kb.documents.chunks(outcome.document.id)
            rows = upload_chunks(text, source=outcome.document.file_path, category="api", doc_id=outcome.document.id)
            assert [(r.doc_id, r.source, r.category, r.chunk_no, r.heading, r.text) for r in stored] == \
                [(r.doc_id, r.source, r.category, r.chunk_no, r.heading, r.text) for r in rows], name
    finally:
        kb.close()
    assert upload_chunks("", source="knowledge_base/api/x.md", category="api") == []


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


def test_the_generated_tree_is_shaped_like_a_docs_site_and_its_translations_form_groups(tmp_path):
    tree = generate_tree(tmp_path, 60, min_kb=1, max_kb=2, big_share=0.1)
    base = tmp_path / "knowledge_base"
    assert tree.documents == 60 and len(tree.refused) == 3
    assert set(tree.depths) <= {4, 5, 6} and len(tree.depths) > 1
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    assert index.load() == 60  # the refused files stay out of L0
    assert {path for path, _ in index.folder.refused_files()} == set(tree.refused)
    pairs = [p for p in tree.pages if p.langs == ("en", "zh")]
    assert pairs and len(pairs) < len(tree.pages)
    for page in pairs:  # the two versions differ only in the language folder, and are one group
        en, zh = (index.get(f"knowledge_base/{path}") for path in page.paths)
        assert page.paths[1] == page.paths[0].replace("/docs/en/", "/docs/zh/")
        assert (en.lang, zh.lang) == ("en", "zh") and en.group == zh.group != ""
        assert page.keyword in en.keywords and page.keyword in zh.keywords
        assert index.match(page.keyword).group_count() == 1
    texts = [(base / path).read_text(encoding="utf-8") for page in tree.pages for path in page.paths]
    assert all("<!--\n#\n# This page belongs to" in t for t in texts) and any("import Tabs from" in t for t in texts)
    assert any("## Attributes {#attributes}" in t for t in texts) and any("## 属性 {#attributes}" in t for t in texts)
    assert any(len(t.encode()) >= 20 * 1024 for t in texts)
    generic = sum(any(k in ("Plugin", "Lumen Gateway", "Kestrel Mesh", "Aster Registry", "Tallow Stream")
                      for k in e.keywords) for e in index.entries())
    assert 0.25 <= generic / 60 <= 0.75
    mix = tree_queries(tree, 10)
    assert {k: len(v) for k, v in mix.items()} == dict.fromkeys(mix, 10) and len(mix) == 6
    assert all(len(q) >= 480 for q in mix["500 chars"])


@pytest.mark.slow
def test_trees_bench_runs_at_tiny_sizes_and_writes_its_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KB_EMBEDDING_MODEL", "no-such-org/no-such-model")
    out = tmp_path / "trees.json"
    assert trees_main(["--files", "20", "--docs", "200", "--queries", "10", "--repeat", "2", "--lookup-repeat", "1",
                       "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Reconcile of a documentation tree" in printed and "budget: L0 p99 <= 0.5 ms" in printed
    report = json.loads(out.read_text())
    assert report["command"].startswith("python -m benchmarks.bench_trees --files 20") and report["machine"]["cpus"]
    r = report["trees"]["reconcile"]
    assert (r["files"], r["documents"], r["refused"], r["second_unchanged"]) == (20, 17, 3, 17)
    assert r["l0_equals_database"] and r["reconcile_s"] > 0 and r["documents_per_s"] > 0
    assert r["peak_rss_mb"] >= r["rss_before_mb"] > 0 and r["rss_growth_mb"] >= 0 and r["memory_measure"]
    g = report["trees"]["l0_groups"]
    assert g["documents"] == 200 and 0 < g["translation_groups"] < g["pages"] < 200
    assert list(g["classes"]) == ["exact (one version)", "twin (en + zh)", "twin, Chinese sentence", "generic",
                                  "miss", "500 chars"]
    for row in [*g["classes"].values(), g["all"]]:
        for part in ("l0", "lookup"):
            assert row[part]["groups"]["n"] == row[part]["no_groups"]["n"] > 0 and row[part]["p99_ratio"] > 0
    twin = g["classes"]["twin (en + zh)"]
    assert (twin["hits_per_query"], twin["pages_per_query"]) == (2, 1)
    assert twin["answers"]["groups"]["high"] == 1.0 and twin["answers"]["no_groups"]["high"] == 0.0
    assert g["classes"]["twin, Chinese sentence"]["answers"]["groups"]["zh_served"] == 1.0
    assert g["budget_p99_ms"] == 0.5 and isinstance(g["budget_met"], bool)
    assert len(report["trees"]["load_average"]) == 2


def test_l0_change_bench_at_tiny_sizes(tmp_path, capsys):
    """One applied change before and after deltas (benchmarks/bench_l0_change.py) at sizes that run in seconds:
    every mode timed, the delta's answers equal a full build's."""
    out = tmp_path / "change.json"
    assert l0_change_main(["--docs", "300", "600", "--after", "5", "--before", "2", "--rounds", "1", "--repeat", "1",
                           "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python -m benchmarks.bench_l0_change --docs 300 600")
    assert [s["documents"] for s in report["changes"]] == [300, 600] and report["delta_limit"] > 5
    for size in report["changes"]:
        assert [r["change"] for r in size["rows"]] == ["add new", "replace", "remove"]
        for row in size["rows"]:
            assert row["before"]["wall"]["n"] == 2 and row["after"]["cpu"]["n"] == 5
            assert row["after, a fold running"]["wall"]["n"] >= 1
    assert all(m["answers_identical"] for m in report["matching"])
    assert "One applied change" in capsys.readouterr().out


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_benchmarks_import_each_other_in_one_direction():
    modules = {p.stem: _imports(p) for p in BENCHMARKS.glob("*.py")}
    assert "benchmarks.bench" not in modules["bench_pages"] and "benchmarks.bench" not in modules["common"]
    assert not any(m.startswith("benchmarks.") for m in modules["common"])


# The faces benchmarks may stand on, with the names each offers: a name outside `__all__` is a submodule
# (`from kb_core import terms`) or a private name, an inside all the same.
FACES = {face.__name__: set(face.__all__) for face in (kb_core, kb_core.console, kb_core.testing)}
# `from kb_core.x import a, b` or `import kb_core.x` inside the code a benchmark hands a child process
_CODE_IMPORT = re.compile(r"\bfrom\s+(kb_core[\w.]*)\s+import\s+\(?\s*(\w+(?:\s*,\s*\w+)*)|\bimport\s+(kb_core[\w.]*)")
# the one way a child process's code may touch sys.path: to import another checkout's code in place of this one
# (bench_cold's preamble for `--against REV`, `root` being that checkout)
_OTHER_CHECKOUT = "sys.path.insert(0, {root!r})"
# private names of code outside kb_core that a benchmark reaches, each with its reason
_PRIVATE_ALLOWED = {
    # the console's own cached knowledge base, the instance its pages render (pages/ is the console, not a face)
    ("render_timing.py", "_open_knowledge_base"),
}


def _outside_the_faces(module: str, names: list[str]) -> list[str]:
    if module.split(".")[0] != "kb_core":
        return []
    if module not in FACES:
        return [module]
    return [f"{module}.{name}" for name in names if name not in FACES[module]]


def inside_uses(path: Path) -> list[str]:
    """What `path` (a benchmark) takes from beside kb_core's faces: imports of kb_core's other modules and names
    (anywhere in the file, inside functions too, and in the code strings it runs in child processes), private
    attributes of anything but its own objects, `sys.path` and tests/ (`tests`, `support`)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(node)}
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += [f"{where} import {m}" for m in _outside_the_faces(alias.name, [])]
                if alias.name.split(".")[0] in ("tests", "support"):
                    found.append(f"{where} import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            found += [f"{where} from {m}" for m in _outside_the_faces(module, [a.name for a in node.names])]
            if module.split(".")[0] in ("tests", "support"):
                found.append(f"{where} from {module}")
        elif isinstance(node, ast.Attribute):
            if node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{where} sys.path")
            elif node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) \
                    and (path.name, node.attr) not in _PRIVATE_ALLOWED:
                found.append(f"{where} private .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for match in _CODE_IMPORT.finditer(node.value):
                module = match.group(1) or match.group(3)
                names = [n.strip() for n in (match.group(2) or "").split(",") if n.strip()]
                found += [f"{where} code string: {m}" for m in _outside_the_faces(module, names)]
            if "sys.path" in node.value.replace(_OTHER_CHECKOUT, ""):
                found.append(f"{where} code string: sys.path")
            if re.search(r"\b(?:from|import)\s+(?:tests|support)\b", node.value):
                found.append(f"{where} code string: imports tests/")
    return found


def test_the_benchmarks_stand_on_kb_cores_faces_and_never_on_tests():
    """Benchmarks use `kb_core`, `kb_core.console` and `kb_core.testing` only (a component a benchmark times on
    its own is `kb_core.testing`'s), never kb_core's other modules or private names, and never put tests/ on
    their path: its helpers are pytest's."""
    assert [use for path in sorted(BENCHMARKS.glob("*.py")) for use in inside_uses(path)] == []


def test_the_faces_check_sees_every_way_in(tmp_path):
    """`inside_uses` finds each way a benchmark used to reach inside: nested imports, a submodule or private name
    through a face, code strings for child processes, private attributes, sys.path and tests/."""
    sample = tmp_path / "bench_sample.py"
    sample.write_text(textwrap.dedent('''
        import sys
        from kb_core import KnowledgeIndex, terms
        from kb_core.testing import NaiveIndex
        from kb_core.testing.milvus_server import milvus_lite_server
        SCRIPT = "import kb_core; from kb_core.keywords.index import KnowledgeIndex"
        FACE = "from kb_core import KnowledgeIndex"
        OTHER = "import sys; sys.path.insert(0, {root!r}); from kb_core import KnowledgeIndex"
        CHILD = "import sys; sys.path.append('tests'); from support.naive_l0 import NaiveIndex"

        def f(store, kb):
            from kb_core.storage.metadata_store import MetadataStore, _alembic_config
            from support.model_factory import build_bge_m3_shaped
            sys.path.append("tests")
            return store._engine, kb._parts, self_like._x
        '''))
    uses = inside_uses(sample)
    assert sorted(u.split(" ", 1)[1] for u in uses) == sorted([
        "from kb_core.terms", "from kb_core.testing.milvus_server", "code string: kb_core.keywords.index",
        "code string: sys.path", "code string: imports tests/", "from kb_core.storage.metadata_store",
        "from support.model_factory", "sys.path", "private ._engine", "private ._parts", "private ._x"]), uses


def test_suggest_bench_at_300_documents(tmp_path, capsys):
    """The did-you-mean benchmark (benchmarks/bench_suggest.py; the `suggest` section of `kb bench`) at a size
    that runs in a second: every class timed, typos named, far codes and plain sentences left alone."""
    report = bench_suggest(docs=300, count=20, repeat=1)
    assert set(report["classes"]) == {"typo", "wrong digit", "unknown code", "plain", "long"}
    assert all(c["n"] == 20 and c["cpu"]["n"] == 20 for c in report["classes"].values())
    assert report["classes"]["typo"]["meant_first"] >= 0.9
    assert report["classes"]["unknown code"]["with_suggestions"] == 0 == report["classes"]["plain"]["with_suggestions"]
    assert report["identifier_keywords"] > 300 and report["budget_met"]  # n/a below 10,000 documents
    assert "| class | p50 / p99 ms | CPU p50 / p99 ms |" in "\n".join(render_suggest(report))
    out = tmp_path / "suggest.json"
    assert suggest_main(["--docs", "300", "--queries", "10", "--repeat", "1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["suggest"]["documents"] == 300 and "Did you mean" in capsys.readouterr().out


def test_the_chinese_corpus_is_product_documentation_and_the_queries_come_from_it(tmp_path):
    """Deterministic Chinese product pages with frontmatter, `##` sections and English identifiers, 10-80 KB;
    summaries are the pages' own, body sentences are cut from the pages."""
    from kb_core import parse_frontmatter

    pages = write_corpus(tmp_path, 25)
    assert [p["text"] for p in pages] == [text for *_, text in zh_documents(25)]
    for page in pages:
        front = parse_frontmatter(page["text"])
        assert front.title.startswith("天穹") and 3 <= len(front.keywords) <= 7 and front.summary == page["summary"]
        assert (tmp_path / page["path"]).read_text(encoding="utf-8") == page["text"]
        assert 10_000 <= len(page["text"].encode()) <= 100_000 and page["text"].count("\n## ") >= 2
        han = sum(1 for ch in page["text"] if "\u4e00" <= ch <= "\u9fff")
        assert han > 0.6 * sum(1 for ch in page["text"] if ch.isalpha())
    assert any(re.search(r"`[A-Za-z]+_[a-z_]+`", p["text"]) for p in pages)
    queries = zh_queries(pages, 10)
    assert set(queries) == set(KINDS) and all(len(v) >= 10 for v in queries.values())
    assert all(any(q.endswith(p["summary"]) for p in pages) for q in queries["summary"])
    assert all(any(q[:12] in p["text"] for p in pages) for q in queries["body sentence"])  # one or two sentences


def test_the_cold_start_benchmark_runs_the_code_it_names_not_the_installed_checkout(tmp_path):
    """`bench_cold --against REV` compares two versions only if each process imports the version it names."""
    from benchmarks.bench_cold import REPO, _import_seconds, _kb, _run

    other = tmp_path / "other"
    (other / "kb_core").mkdir(parents=True)
    (other / "kb_core" / "__init__.py").write_text("WHICH = 'other'\n")
    (other / "kb_core" / "command.py").write_text("def run(argv):\n    print('other', argv)\n    return 0\n")
    (other / "pyproject.toml").write_text('[project]\nname = "x"\n[project.scripts]\nkb = "kb_core.command:run"\n')
    kb_root = tmp_path / "kb"
    kb_root.mkdir()
    _, out, _ = _run(other, kb_root, _kb(other), "lookup", "X")  # the `kb` that checkout declares
    assert out.split() == ["other", "['lookup',", "'X']"]
    assert _kb(tmp_path) == _kb(REPO)  # no pyproject.toml (the first versions): the function this one declares
    _, out, _ = _run(REPO, kb_root, "import kb_core; print(kb_core.__file__)")
    assert out.strip() == str(REPO / "kb_core" / "__init__.py")
    wall, own = _import_seconds(REPO, kb_root)
    assert 0 < own < wall


def test_the_open_benchmark_opens_with_the_code_it_names(tmp_path):
    """`bench_open --against REV`: the other version's processes import that version's kb_core, and can save
    their own snapshot."""
    from benchmarks.bench_open import _fresh_l0

    other = tmp_path / "other"
    (other / "kb_core").mkdir(parents=True)
    (other / "kb_core" / "__init__.py").write_text(  # the public name, as every version of kb_core has it
        "from pathlib import Path\n"
        "class KnowledgeIndex:\n"
        "    def __init__(self, base, *, app_root, snapshot_path):\n"
        "        self.root = Path(app_root)\n"
        "    def load(self):\n"
        "        (self.root / 'opened-by-other').write_text('yes')\n"
        "    def close(self):\n"
        "        (self.root / 'saved-by-other').write_text('yes')\n"
        "    def discard(self):\n"
        "        pass\n")
    root = tmp_path / "kb"
    (root / "knowledge_base").mkdir(parents=True)
    assert _fresh_l0(root, "off", other) >= 0
    assert (root / "opened-by-other").exists() and not (root / "saved-by-other").exists()
    _fresh_l0(root, str(root / "l0-against.snap"), other, save=True)
    assert (root / "saved-by-other").exists()


def test_the_chinese_heavy_benchmark_compares_with_the_code_it_names(tmp_path):
    """`bench_zh --against REV`: the other version's own benchmark and kb_core answer, and the table sets its
    p99 beside this commit's."""
    from benchmarks.bench_zh import VARIANTS, render_against, run_with_code

    other = tmp_path / "other"
    (other / "benchmarks").mkdir(parents=True)
    (other / "benchmarks" / "__init__.py").write_text("")
    row = {v: {"p50_ms": 10.0, "p99_ms": 40.0, "n": 1} for v in VARIANTS}
    (other / "benchmarks" / "bench_zh.py").write_text(
        "import json, sys\n"
        "def main():\n"
        "    out = sys.argv[sys.argv.index('--json') + 1]\n"
        f"    row = {row!r}\n"
        "    json.dump({'zh': {'all': row, 'kinds': {'summary': row}, 'l1_mode': 'other'}}, open(out, 'w'))\n"
        "    return 0\n")
    got = run_with_code(other, tmp_path, ["--docs", "3"])
    assert got["l1_mode"] == "other" and got["all"] == row
    mine = {"all": {v: {"p50_ms": 5.0, "p99_ms": 20.0} for v in VARIANTS},
            "kinds": {"summary": {v: {"p50_ms": 5.0, "p99_ms": 20.0} for v in VARIANTS}}}
    table = render_against(mine, {"rev": "abc123", **got})
    assert "| **all** | 5.0 / 20.0 | 10.0 / 40.0 | 2.00x |" in table

"""Documentation trees copied into the folder: nested categories under one path rule, the same for the scan (L0),
reconcile (the database and Milvus) and the status; files the rule refuses are listed once with the reason."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.documents import doc, write_doc
from support.stores import NO_MODEL, assert_consistent

from kb_core import UploadRejected
from kb_core.bootstrap import parts_of


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(db_url=db_url, model=NO_MODEL)

TREE = {  # a generated docs site in our own words: en/zh pairs, generic keywords, anchors, licence headers
    "gateway/docs/en/latest/plugins/limit-req.md": doc("limit-req", ["limit-req", "Plugin", "APISIX"],
                                                       "Limit the request rate", "# limit-req {#limit-req}\n\n"
                                                       "<!-- Licensed to the Apache Software Foundation -->\n"
                                                       "## Attributes {#attributes}\n\nrate, burst.\n"),
    "gateway/docs/zh/latest/plugins/limit-req.md": doc("limit-req", ["limit-req", "插件", "APISIX"], "限制请求速率",
                                                       "# limit-req\n\n## 属性 {#attributes}\n\nrate 与 burst。\n"),
    "gateway/docs/en/latest/getting-started/README.md": doc("Getting started", ["quickstart", "APISIX"],
                                                            "Install and route", "# Getting started\n\nInstall.\n"),
    "registry/v2.1/zh_CN/cluster.md": doc("集群部署", ["集群", "cluster mode"], "三节点集群", "# 集群\n\n三个节点。\n"),
}
REFUSED = {
    "loose.md": "not in a category folder",
    "gateway/my docs/spaces.md": "not allowed",
    "gateway/con/reserved.md": "reserved on Windows",
}


def _copy_tree(root) -> None:
    for relative, text in {**TREE, **{r: doc("Refused", ["refused-kw"]) for r in REFUSED}}.items():
        write_doc(root, f"knowledge_base/{relative}", text)


def test_a_copied_tree_is_indexed_where_it_lies_and_refused_files_are_listed_once(kb, tmp_path):
    _copy_tree(tmp_path)
    report = kb.documents.reconcile()
    assert sorted(report.added) == sorted(f"knowledge_base/{r}" for r in TREE)
    assert report.failed == ()
    refused = dict(report.refused)
    assert set(refused) == {f"knowledge_base/{r}" for r in REFUSED}
    for relative, why in REFUSED.items():
        assert why in refused[f"knowledge_base/{relative}"]
    assert kb.lookup_knowledge("refused-kw")["found"] is False  # refused everywhere: L0 too
    assert {d.category for d in kb.documents.list()} == {"gateway/docs/en/latest/plugins",
                                                         "gateway/docs/zh/latest/plugins",
                                                    "gateway/docs/en/latest/getting-started", "registry/v2.1/zh_CN"}
    counts = kb.status().counts
    assert counts.consistent and counts.refused == len(REFUSED) and counts.l0_not_in_database == 0
    assert kb.documents.unindexed_files() == []
    assert_consistent(kb)

    shutil.rmtree(tmp_path / "knowledge_base/gateway")  # the tree goes away
    assert any("3 documents in the database have no file on disk" in p for p in kb.status(max_age=0).counts.problems)
    report = kb.documents.reconcile(delete_missing=True)
    assert len(report.removed) == 3
    assert kb.lookup_knowledge("limit-req")["found"] is False
    assert [d.file_path for d in kb.documents.list()] == ["knowledge_base/registry/v2.1/zh_CN/cluster.md"]
    assert_consistent(kb)


def test_reconcile_of_some_paths_takes_a_nested_folder(kb, tmp_path):
    _copy_tree(tmp_path)
    report = kb.documents.reconcile(["knowledge_base/gateway/docs/zh"])
    assert report.added == ("knowledge_base/gateway/docs/zh/latest/plugins/limit-req.md",)
    assert report.refused == ()  # the refused files lie elsewhere


PLACES = [*TREE, "gateway/docs/en/latest/plugins/new.md", "registry/v2.1/zh_CN/other.md", "ops/runbook.md"]
OPERATIONS = st.lists(st.tuples(st.sampled_from(["write", "edit", "delete", "move"]), st.sampled_from(PLACES),
                                st.sampled_from(PLACES), st.integers(0, 3)), max_size=8)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_after_any_edits_on_disk_reconcile_leaves_l0_equal_to_the_database(kb, tmp_path, operations):
    """Creates, edits, moves and deletes made by hand, then reconcile: L0's documents are exactly the database's
    documents with valid frontmatter, and disk, database and Milvus agree (assert_consistent)."""
    base = tmp_path / "knowledge_base"
    for operation, place, other, n in operations:
        path, target = base / place, base / other
        if operation in ("write", "edit"):
            text = doc(f"Doc {n}", [f"KW_{n}", "Plugin"]) if n else "# no frontmatter\n\nplain text\n"
            write_doc(tmp_path, f"knowledge_base/{place}", text)
        elif operation == "delete":
            path.unlink(missing_ok=True)
        elif path.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
    kb.documents.reconcile(delete_missing=True)
    assert_consistent(kb)
    with_frontmatter = {d.file_path for d in kb.documents.list() if d.metadata_json}
    assert {e.file_path for e in parts_of(kb).index.entries()} == with_frontmatter


def test_the_longest_category_the_rule_allows_fits_the_database(kb):
    category = "/".join(["segment-of-fifteen"[:15]] * 16)  # 16 levels, 255 characters
    assert len(category) == 255
    outcome = kb.documents.upload("x.md", doc("Deep", ["DEEP_KEYWORD"]).encode(), category)
    assert kb.documents.get(outcome.document.id).category == category
    assert kb.lookup_knowledge("DEEP_KEYWORD")["primary"]["source"] == outcome.document.file_path
    assert_consistent(kb)


def test_translations_are_one_page_served_in_the_querys_language(kb, tmp_path):
    _copy_tree(tmp_path)
    kb.documents.reconcile()
    en, zh = (f"knowledge_base/gateway/docs/{lang}/latest/plugins/limit-req.md" for lang in ("en", "zh"))
    english = kb.lookup_knowledge("how do I configure limit-req")
    assert english["primary"]["source"] == en and english["primary"]["confidence"] == "high"  # a twin: no clash
    assert english["primary"]["translations"] == [{"source": zh, "lang": "zh"}]
    assert english["supplement"] is None  # one page: L1 is not called
    chinese = kb.lookup_knowledge("limit-req 插件怎么配置")
    assert chinese["primary"]["source"] == zh and chinese["primary"]["translations"] == [{"source": en, "lang": "en"}]
    plain = kb.lookup_knowledge("ERR_NOTHING_HERE")
    assert plain["primary"] is None
    untranslated = kb.lookup_knowledge("quickstart")
    assert "translations" not in untranslated["primary"]  # the spec's shape for a page without translations
    rows = {r.keyword: r for r in kb.keywords.map().rows}
    assert rows["limit-req"].kind != "clash" and not rows["limit-req"].problem  # twin-only: not flagged
    assert rows["APISIX"].claimants == 2  # three files, two pages
    preview = kb.documents.preview_upload("limit-req.md", TREE["gateway/docs/zh/latest/plugins/limit-req.md"].encode(),
                                "gateway/docs/ja/latest/plugins")
    assert not [f for f in preview.findings if "limit-req" in f.message]  # a third language joins the page
    assert {e.lang for e in parts_of(kb).index.entries()} == {"en", "zh"}


def test_the_language_comes_from_frontmatter_then_the_path_then_the_script():
    from kb_core.documents.language import document_language, query_language, translation_key

    assert document_language("docs/en/a.md", {"lang": "zh-CN"}, "text") == "zh"
    assert document_language("docs/zh_CN/a.md", {}, "English text") == "zh"
    assert document_language("guide/a.ja.md", {}, "text") == "ja"
    assert document_language("gateway-zh/a.md", {}, "English text") == "zh"
    assert document_language("guide/a.md", {}, "限流插件的配置方法") == "zh"
    assert document_language("guide/a.md", {}, "How to configure") == "en"
    assert document_language("guide/a.md", {}, "12345 !!") == "und"
    assert translation_key("docs/en/latest/a.md", {}) == translation_key("docs/zh/latest/a.md", {}) != ""
    keyed = {"translationKey": "rate"}
    assert translation_key("a/x.md", keyed) == translation_key("b/y.md", keyed)
    assert translation_key("gateway-zh/x.md", {}) == translation_key("gateway/x.md", {})  # a suffixed folder
    assert translation_key("api/x.md", {}) != translation_key("api/y.md", {})
    assert (query_language("限流"), query_language("rate limit"), query_language("rate", "de")) == ("zh", "en", "de")


def test_paths_that_differ_only_in_case_are_one_file_and_are_refused_once(kb, tmp_path):
    write_doc(tmp_path, "knowledge_base/gateway/Route.md", doc("Route", ["ROUTE_UPPER"]))
    write_doc(tmp_path, "knowledge_base/gateway/route.md", doc("route", ["route_lower"]))
    report = kb.documents.reconcile()
    assert report.added == ("knowledge_base/gateway/Route.md",)
    [(path, why)] = report.refused
    assert path == "knowledge_base/gateway/route.md"
    assert "differs only in case from knowledge_base/gateway/Route.md" in why
    assert not kb.lookup_knowledge("route_lower")["found"]  # refused everywhere, L0 too
    assert_consistent(kb)
    with pytest.raises(UploadRejected, match="differs only in case"):
        kb.documents.upload("ROUTE.md", doc("x", ["x-kw"]).encode(), "gateway")
    with pytest.raises(UploadRejected, match="differs only in case from knowledge_base/gateway"):
        kb.documents.upload("new.md", doc("x", ["x-kw"]).encode(), "Gateway")
    assert kb.documents.upload("Route.md", doc("Route v2", ["ROUTE_UPPER"]).encode(), "gateway").action == "replaced"


def test_l1_prefers_the_querys_language_among_a_pages_versions(kb, tmp_path):
    """Two near-equal chunks in two languages (an identifier both versions mention): the query's language wins,
    and the primary's own page is not repeated as the supplement."""
    for lang, words in (("en", "Tune the ERR_LIMIT_77 threshold"), ("zh", "调整 ERR_LIMIT_77 阈值")):
        write_doc(tmp_path, f"knowledge_base/guide/{lang}/limits.md",
                  doc(f"limits {lang}", [f"limits-{lang}"], body=f"# Limits\n\n{words}.\n"))
    write_doc(tmp_path, "knowledge_base/guide/en/other.md", doc("other", ["other-kw"], body="# Other\n\nNothing.\n"))
    kb.documents.reconcile()
    english = kb.lookup_knowledge("ERR_LIMIT_77 threshold")
    assert english["primary"] is None and english["supplement"]["source"] == "knowledge_base/guide/en/limits.md"
    chinese = kb.lookup_knowledge("ERR_LIMIT_77 阈值")
    assert chinese["supplement"]["source"] == "knowledge_base/guide/zh/limits.md"

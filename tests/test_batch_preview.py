"""`preview_batch`: what only shows across a batch, judged on a real folder and L0 index (no stores)."""

from __future__ import annotations

import hashlib

import pytest
from conftest import doc, internals, write_doc

from kb_core.documents.batch import CLASH, INDEX, NEW, REFUSED, REPLACE, SAME, BatchFile, preview_batch
from kb_core.documents.folder import suggest_category, validate_file_name
from kb_core.errors import UploadRejected
from kb_core.retrieval.keyword_index import KnowledgeIndex

GATEWAY = doc("API gateway overview", ["APISIX", "API 网关", "Route"], "What the gateway does.")


@pytest.fixture
def index(tmp_path):
    write_doc(tmp_path, "knowledge_base/gateway/overview.md", GATEWAY)
    write_doc(tmp_path, "knowledge_base/gateway/upstream.md", doc("Upstream", ["Upstream", "APISIX"]))
    built = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    built.load()
    return built


def _batch(index, *files, category="gateway", stored=None):
    return preview_batch(index, [BatchFile(*f) for f in files], category, max_bytes=64 * 1024,
                         paths_with_content=(lambda digests: stored or {}) if stored is not None else None)


def _messages(verdict) -> str:
    return " | ".join(f.message for f in verdict.findings)


def test_keyword_clashes_count_the_batch_and_forget_what_it_replaces(index):
    # overview.md is replaced by a version without APISIX: only upstream.md and the batch's other file remain
    new_overview = doc("API gateway overview", ["API 网关", "Overview"], "What the gateway does.")
    plugin = doc("Plugin hub", ["APISIX", "PluginHub"])
    limit = doc("limit-count", ["PluginHub", "限流"])
    batch = _batch(index, ("overview.md", new_overview.encode()), ("plugins.md", plugin.encode()),
                   ("limit-count.md", limit.encode()))
    overview, plugins, counting = batch.files
    assert overview.action == REPLACE and overview.if_match == hashlib.sha256(GATEWAY.encode()).hexdigest()
    assert "L0 will be ambiguous for: APISIX — also in knowledge_base/gateway/upstream.md" in _messages(plugins)
    assert "overview.md" not in _messages(plugins)
    assert "L0 will be ambiguous for: PluginHub — also in knowledge_base/gateway/limit-count.md" in _messages(plugins)
    assert "PluginHub — also in knowledge_base/gateway/plugins.md" in _messages(counting)
    assert "ambiguous" not in _messages(overview)  # 'API 网关' was its own, and it keeps it
    assert (plugins.action, counting.action) == (NEW, NEW) and batch.blocked is None


def test_same_target_blocks_the_batch_case_insensitively_and_a_rename_resolves_it(index):
    batch = _batch(index, ("Route.md", GATEWAY.encode()), ("route.md", b"# other\n"))
    assert [v.same_target_as for v in batch.files] == [("route.md",), ("Route.md",)]
    assert [v.action for v in batch.files] == [CLASH, CLASH] and batch.refused == ()
    assert batch.blocked and batch.uploadable == ()
    renamed = _batch(index, ("Route.md", GATEWAY.encode()), ("route.md", b"# other\n", "route-zh.md"))
    assert renamed.blocked is None
    assert [v.file_path for v in renamed.files] == ["knowledge_base/gateway/Route.md",
                                                   "knowledge_base/gateway/route-zh.md"]
    assert "renamed from route.md" in _messages(renamed.files[1])


def test_duplicates_by_content_and_identical_versions(index):
    digest = hashlib.sha256(GATEWAY.encode()).hexdigest()
    stored = {digest: ["knowledge_base/gateway/overview.md"]}
    batch = _batch(index, ("copy.md", GATEWAY.encode()), ("copy-2.md", GATEWAY.encode()), category="api",
                   stored=stored)
    assert batch.files[0].duplicate_of == ("knowledge_base/gateway/overview.md",)
    assert batch.files[1].duplicate_of == ("knowledge_base/gateway/overview.md", "copy.md (this batch)")
    same = _batch(index, ("overview.md", GATEWAY.encode()), stored=stored).files[0]
    assert same.action == SAME and same.duplicate_of == ()
    unsynced = _batch(index, ("overview.md", GATEWAY.encode()), stored={}).files[0]
    assert unsynced.action == INDEX


def test_one_category_problem_for_the_batch_and_refusals_per_file(index):
    batch = _batch(index, ("a.md", b"# a\n"), ("b.md", b"\x00"), category="Gateway Plugins")
    assert batch.suggested_category == "gateway-plugins" and "did you mean 'gateway-plugins'" in batch.blocked
    assert [v.action for v in batch.files] == [NEW, REFUSED]
    assert [v.errors for v in batch.files] == [(), ("b.md looks binary (it contains NUL bytes), not Markdown text",)]
    assert _batch(index, ("a.md", b"# a\n"), category="").category_problem.startswith("choose a category")


@pytest.mark.parametrize(("typed", "suggested"), [("Gateway Plugins", "gateway-plugins"), ("API", "api"),
                                                  ("  Run Books!! ", "run-books"), ("网关", None), ("api", None)])
def test_category_suggestions(typed, suggested):
    assert suggest_category(typed) == suggested


def test_markdown_extension_is_stored_as_md():
    assert validate_file_name("consumer.markdown") == "consumer.md"
    assert validate_file_name("Guide.MARKDOWN") == "Guide.md"
    with pytest.raises(UploadRejected, match="'<name>.markdown'"):
        validate_file_name("notes.txt")


def test_the_facade_finds_duplicates_in_the_database(open_kb, db_url):
    kb = open_kb(db_url=db_url)
    kb.upload("overview.md", GATEWAY.encode(), "gateway")
    kb.upload("upstream.md", doc("Upstream", ["Upstream"]).encode(), "gateway")
    batch = kb.preview_batch([BatchFile("overview-copy.md", GATEWAY.encode()),
                              BatchFile("overview.md", GATEWAY.encode())], "api")
    assert [v.duplicate_of for v in batch.files] == [
        ("knowledge_base/gateway/overview.md",),
        ("knowledge_base/gateway/overview.md", "overview-copy.md (this batch)")]
    assert internals(kb).metadata.paths_with_content([hashlib.sha256(GATEWAY.encode()).hexdigest(), "0" * 64]) == {
        hashlib.sha256(GATEWAY.encode()).hexdigest(): ["knowledge_base/gateway/overview.md"]}

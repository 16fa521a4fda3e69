"""`preview_batch`: what only shows across a batch, judged on a real folder and L0 index (no stores)."""

from __future__ import annotations

import hashlib

import pytest
from support.documents import doc, write_doc

from kb_core.bootstrap import parts_of
from kb_core.documents.batch import (
    CLASH,
    DUPLICATE,
    INDEX,
    NEW,
    REFUSED,
    REPLACE,
    SAME,
    BatchFile,
    preview_batch,
)
from kb_core.documents.path_rule import categories_below, category_folders, suggest_category, validate_file_name
from kb_core.errors import UploadRejected
from kb_core.keywords.index import KnowledgeIndex

GATEWAY = doc("API gateway overview", ["APISIX", "API 网关", "Route"], "What the gateway does.")


@pytest.fixture
def index(tmp_path):
    write_doc(tmp_path, "knowledge_base/gateway/overview.md", GATEWAY)
    write_doc(tmp_path, "knowledge_base/gateway/upstream.md", doc("Upstream", ["Upstream", "APISIX"]))
    built = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    built.load()
    return built


def _batch(index, *files, category="gateway", stored=None):
    return preview_batch(index, [BatchFile(*f) for f in files], category,
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


def test_duplicates_are_skipped_with_a_reason_unless_asked_for(index):
    digest = hashlib.sha256(GATEWAY.encode()).hexdigest()
    stored = {digest: ["knowledge_base/gateway/overview.md"]}
    plugin = doc("Plugin hub", ["PluginHub"])
    files = [BatchFile(*f) for f in (("copy.md", GATEWAY.encode()), ("plugins.md", plugin.encode()),
                                     ("plugins-2.md", plugin.encode()), ("overview.md", GATEWAY.encode()))]

    def batch(**kw):
        return preview_batch(index, files, "gateway", paths_with_content=lambda d: stored, **kw)

    copy, plugins, plugins_2, overview = batch().files
    assert [v.action for v in (copy, plugins, plugins_2, overview)] == [DUPLICATE, NEW, DUPLICATE, SAME]
    assert copy.skip_reason.startswith("duplicate of knowledge_base/gateway/overview.md: ")
    assert plugins_2.skip_reason.startswith("duplicate of plugins.md (this batch): ")
    assert overview.skip_reason == "identical to the indexed version of knowledge_base/gateway/overview.md: nothing " \
                                   "to do"
    assert plugins.skip_reason is None
    skipped = batch()
    assert skipped.skipped == (copy, plugins_2, overview) and [v.upload_name for v in skipped.uploadable] == [
        "plugins.md"]
    assert not any(a.keyword == "PluginHub" for a in skipped.ambiguous())  # the skipped copy claims nothing

    anyway = batch(duplicates_anyway=True)
    assert [v.action for v in anyway.files] == [NEW, NEW, NEW, SAME]  # the indexed version itself: still nothing
    assert [v.upload_name for v in anyway.duplicates] == ["copy.md", "plugins-2.md"]
    [hub] = [a for a in anyway.ambiguous() if a.keyword == "PluginHub"]
    assert hub.files == ("plugins.md", "plugins-2.md")
    assert hub.documents == ("knowledge_base/gateway/plugins.md", "knowledge_base/gateway/plugins-2.md")


def test_ambiguity_is_grouped_per_keyword_across_the_batch(index):
    files = [(f"p{i}.md", doc(f"P{i}", ["APISIX", f"own-{i}"]).encode()) for i in range(4)]
    batch = _batch(index, *files)
    [apisix] = batch.ambiguous()  # one group, not one warning per file
    assert apisix.keyword == "APISIX" and apisix.files == tuple(f[0] for f in files)
    assert set(apisix.documents) == {*(f"knowledge_base/gateway/p{i}.md" for i in range(4)),
                                     "knowledge_base/gateway/overview.md", "knowledge_base/gateway/upstream.md"}
    assert all("L0 will be ambiguous for: APISIX" in _messages(v) for v in batch.files)  # each file's own line stays


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
    kb.documents.upload("overview.md", GATEWAY.encode(), "gateway")
    kb.documents.upload("upstream.md", doc("Upstream", ["Upstream"]).encode(), "gateway")
    batch = kb.documents.preview_batch([BatchFile("overview-copy.md", GATEWAY.encode()),
                              BatchFile("overview.md", GATEWAY.encode())], "api")
    assert [v.duplicate_of for v in batch.files] == [
        ("knowledge_base/gateway/overview.md",),
        ("knowledge_base/gateway/overview.md", "overview-copy.md (this batch)")]
    assert parts_of(kb).metadata.paths_with_content([hashlib.sha256(GATEWAY.encode()).hexdigest(), "0" * 64]) == {
        hashlib.sha256(GATEWAY.encode()).hexdigest(): ["knowledge_base/gateway/overview.md"]}


# -- a folder (directory upload): each file at its own nested category ------------------------------------
ROUTE_EN = doc("Route", ["Route", "Upstream"], "Match requests and send them upstream.")
ROUTE_ZH = doc("路由", ["路由", "上游"], "匹配请求并转发到上游。")
LIMIT_REQ = doc("limit-req", ["limit-req", "leaky bucket"], "Rate limiting with a leaky bucket.")


def _tree(*paths_and_bodies, keep_top=True, renames=None):
    renames = renames or {}
    return [BatchFile.in_folder(path, body.encode() if isinstance(body, str) else body, renames.get(path),
                                keep_top=keep_top) for path, body in paths_and_bodies]


def test_a_folder_maps_each_file_to_its_own_nested_category(index, tmp_path):
    write_doc(tmp_path, "knowledge_base/gateway/docs/en/route.md", ROUTE_EN)  # already there: a replace
    tree = _tree(("docs/en/route.md", doc("Route", ["Route", "Upstream", "Router"], "Revised.")),
                 ("docs/zh/route.md", ROUTE_ZH),  # the same name in another folder: no clash
                 ("docs/en/latest/plugins/limit-req.markdown", LIMIT_REQ),
                 ("docs/my notes/draft.md", doc("Draft", ["draft"])),  # a folder name the rule refuses
                 ("docs/en/logo.png", b"\x89PNG"), (".github/ISSUE_TEMPLATE/bug.md", "# bug\n"),
                 ("docs/.vitepress/config.md", "# hidden\n"), ("docs/README", "readme"))
    assert [f.skipped for f in tree] == [None] * 4 + ["not Markdown", "hidden", "hidden", "not Markdown"]
    assert [f.folder for f in tree[:4]] == ["docs/en", "docs/zh", "docs/en/latest/plugins", "docs/my notes"]
    batch = preview_batch(index, [f for f in tree if not f.skipped], "gateway")
    route_en, route_zh, limit_req, draft = batch.files
    assert [v.file_path for v in batch.files] == ["knowledge_base/gateway/docs/en/route.md",
                                                  "knowledge_base/gateway/docs/zh/route.md",
                                                  "knowledge_base/gateway/docs/en/latest/plugins/limit-req.md",
                                                  None]
    assert [v.category for v in batch.files[:3]] == ["gateway/docs/en", "gateway/docs/zh",
                                                     "gateway/docs/en/latest/plugins"]
    assert [v.upload_name for v in batch.files] == [
        "docs/en/route.md", "docs/zh/route.md", "docs/en/latest/plugins/limit-req.markdown", "docs/my notes/draft.md"]
    assert (route_en.action, route_zh.action, limit_req.action, draft.action) == (REPLACE, NEW, NEW, REFUSED)
    assert route_en.if_match == hashlib.sha256(ROUTE_EN.encode()).hexdigest()
    [reason] = draft.errors
    assert "the folder name 'my notes' is not allowed" in reason
    assert batch.category_problem is None and batch.blocked is None and batch.refused == (draft,)
    assert "ambiguous" not in _messages(route_zh)  # 路由/上游 are its own; Route stays with the version it replaces

    # the folder's own name dropped: its content goes straight into the category
    flat = preview_batch(index, _tree(("docs/en/route.md", ROUTE_EN), ("docs/index.md", ROUTE_ZH), keep_top=False),
                         "gateway")
    assert [v.file_path for v in flat.files] == ["knowledge_base/gateway/en/route.md",
                                                 "knowledge_base/gateway/index.md"]


def test_same_target_within_a_folder_is_case_insensitive_and_a_rename_keeps_the_folder(index):
    files = [("docs/en/Route.md", ROUTE_EN), ("docs/en/route.md", ROUTE_ZH), ("docs/zh/route.md", ROUTE_ZH)]
    batch = preview_batch(index, _tree(*files), "gateway")
    assert [v.action for v in batch.files] == [CLASH, CLASH, NEW]  # only the two of one folder
    assert batch.files[0].same_target_as == ("docs/en/route.md",) and batch.blocked
    renamed = preview_batch(index, _tree(*files, renames={"docs/en/route.md": "route-2.md"}), "gateway")
    assert renamed.blocked is None
    assert renamed.files[1].file_path == "knowledge_base/gateway/docs/en/route-2.md"
    # a single file and a folder's top-level file aimed at one path clash too: one code path for both
    mixed = preview_batch(index, [BatchFile("route.md", ROUTE_EN.encode()), *_tree(("docs/route.md", ROUTE_ZH),
                                                                                     keep_top=False)],
                          "gateway")
    assert [v.action for v in mixed.files] == [CLASH, CLASH]


def test_a_folder_too_long_or_too_deep_is_refused_per_file_before_any_write(index):
    deep = "/".join(["d" * 60] * 5)  # 5 valid folder names, but the category would be over 255 characters
    batch = preview_batch(index, _tree((f"{deep}/page.md", ROUTE_EN), ("docs/ok.md", LIMIT_REQ)), "gateway")
    assert [v.action for v in batch.files] == [REFUSED, NEW]
    assert "longer than 255 characters" in batch.files[0].errors[0]
    too_deep = preview_batch(index, _tree(("/".join("abcdefghijklmnopq") + "/page.md", ROUTE_EN)), "gateway")
    assert "deeper than 16 folders" in too_deep.files[0].errors[0]


def test_category_folders_in_tree_order_and_the_categories_below_a_folder():
    categories = ["gateway", "gateway-zh", "apisix/docs/en/latest/plugins", "apisix/docs/zh/latest",
                  "apisix/docs-old", "gateway"]
    assert category_folders(categories) == [
        "apisix", "apisix/docs", "apisix/docs/en", "apisix/docs/en/latest", "apisix/docs/en/latest/plugins",
        "apisix/docs/zh", "apisix/docs/zh/latest", "apisix/docs-old", "gateway", "gateway-zh"]
    assert categories_below(categories, ["apisix/docs"]) == {"apisix/docs/en/latest/plugins", "apisix/docs/zh/latest"}
    assert categories_below(categories, ["gateway", "apisix/docs/zh/latest"]) == {"gateway", "apisix/docs/zh/latest"}
    assert categories_below(categories, []) == set() and category_folders([]) == []


def test_an_ambiguity_names_a_few_documents_and_counts_the_rest():
    """A generic keyword of a real tree is claimed by hundreds of pages: the warning names five and counts the
    others instead of a wall of ~250 paths."""
    from kb_core.documents.lint import ambiguity_warning

    others = [f"knowledge_base/apisix/docs/en/plugins/p{i:03d}.md" for i in range(250)]
    message = ambiguity_warning("Plugin", others).message
    assert message == ("L0 will be ambiguous for: Plugin — also in " + ", ".join(others[:5]) + " and 245 more")
    assert ambiguity_warning("route", others[:2]).message.endswith("also in " + ", ".join(others[:2]))

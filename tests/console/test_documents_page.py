"""The Documents page at realistic scale, with AppTest against real stores (SQLite, Milvus Lite): the keyword
map's filter, click and in-place edit; row selection into the inspector, chunk search, the L1-only badge,
deleting from the inspector and removing documents whose file has gone.

The fixture is tests/fixtures/realistic_kb (49 English and Chinese product documents) plus one document with
extra frontmatter fields, synced once per module and copied for each test (a sync takes seconds)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from support.console import APP, finish_jobs
from support.documents import doc, write_doc
from support.paths import FIXTURES
from support.stores import NO_MODEL, make_settings

ZH_LIMIT_REQ = "knowledge_base/gateway-zh/limit-req.md"
EN_LIMIT_REQ = "knowledge_base/gateway/limit-req.md"
RUNBOOK = "knowledge_base/ops/runbook-high-latency.md"  # no frontmatter: L1 only
EXTRA = "knowledge_base/gateway/plugin-config.md"
EXTRA_DOC = """---
# Generated from the plugin reference; keep the order of keys.
title: Plugin configuration
keywords: [plugin_attr, "plugin config", 插件配置]
summary: Where plugin attributes live and how a reload picks them up.
sidebar_position: 4
tags: [config, reload]
sections:
  reload: Reloading plugins
  attrs: Global attributes
---

# Plugin configuration

Global plugin attributes live under `plugin_attr` in config.yaml. A reload through the Admin API picks up
changes without restarting workers.
"""


@pytest.fixture(scope="module")
def synced_template(tmp_path_factory) -> Path:
    from kb_core import open_knowledge_base

    root = tmp_path_factory.mktemp("realistic")
    shutil.copytree(FIXTURES / "realistic_kb", root / "knowledge_base")
    (root / EXTRA).write_text(EXTRA_DOC, encoding="utf-8")
    kb = open_knowledge_base(make_settings(root))
    kb.documents.reconcile()
    kb.close()
    return root


@pytest.fixture
def root(synced_template, tmp_path, monkeypatch) -> Path:
    """A private copy of the synced stores; the app opens them through the usual settings."""
    root = tmp_path / "app"
    shutil.copytree(synced_template, root, ignore=shutil.ignore_patterns("*.lock", "*.locks"))
    monkeypatch.setenv("KB_APP_ROOT", str(root))
    monkeypatch.setenv("KB_EMBEDDING_MODEL", NO_MODEL)
    for name in ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_BASE_PATH", "KB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()  # the cache outlives AppTest runs in one process
    yield root
    st.cache_resource.clear()


def documents_page(tab: str = "Documents") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["documents_tab"] = tab
    at.run()
    at.switch_page("../../pages/documents.py").run()
    assert not at.exception, at.exception
    return at


def table(at: AppTest, column: str):
    """The first dataframe with `column` (its element and its rows as a DataFrame)."""
    frame = next(f for f in at.dataframe if column in f.value.columns)
    return frame, frame.value


def click_row(at: AppTest, column: str, value: str, *, table_with: str | None = None) -> AppTest:
    """Select the row whose `column` equals `value` (in the first table with `table_with`, default `column`), as
    a click on it in the browser does."""
    frame, rows = table(at, table_with or column)
    index = list(rows[column]).index(value)
    at.session_state[frame.key] = {"selection": {"rows": [index], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    return at


def markdown_text(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown)


# -- keyword map ---------------------------------------------------------------------------------------------
def test_keyword_map_shows_problems_only_by_default_and_all_on_demand(root):
    at = documents_page("Keyword map")
    metrics = {m.label: int(m.value) for m in at.metric}
    _, problems = table(at, "hits for the bare keyword")
    kinds = dict(zip(problems["keyword"], problems["problem"], strict=True))
    # generic first, most claimed first; an identical clash; an overlap (`API` inside `API Gateway` etc.); weak
    assert list(problems["keyword"][:2]) == ["Apache Lumen", "Kestrel"]
    assert kinds["FAQ"] == "⚠️ clash" and kinds["API"] == "⚠️ overlap" and kinds["2.0"] == "🚫 weak"
    assert "limit-req" not in kinds  # claimed only by the English and Chinese versions of one page: no clash
    assert problems.set_index("keyword").loc["API", "hits for the bare keyword"] == 8
    assert "inside “API 网关”" in problems.set_index("keyword").loc["API", "why"]
    # shadowing is harmless and unique keywords are fine: neither is a problem
    assert "API Gateway" in kinds and "Admin API" not in kinds and "leaky bucket" not in kinds
    assert metrics["Ambiguous keywords"] == sum(k.startswith("⚠️") for k in kinds.values())
    assert metrics["Inside a longer keyword"] == sum(k == "⚠️ overlap" for k in kinds.values())

    at.radio(key="kw_filter").set_value("All keywords").run()
    _, everything = table(at, "hits for the bare keyword")
    kinds = dict(zip(everything["keyword"], everything["problem"], strict=True))
    assert kinds["Admin API"] == "shadows (harmless)" and kinds["leaky bucket"] == ""
    assert len(everything) > len(problems)


def test_clicking_a_keyword_lists_the_documents_a_bare_query_returns(root):
    at = click_row(documents_page("Keyword map"), "keyword", "API", table_with="hits for the bare keyword")
    assert "“API”" in [h.value for h in at.subheader]
    _, hits = table(at, "matched by")
    how = dict(zip(hits["document"], hits["how"], strict=True))
    assert len(hits) == 8
    assert how["knowledge_base/gateway/admin-api.md"] == "claims it"
    assert how["knowledge_base/gateway/key-auth.md"] == "a longer keyword contains it"


def test_editing_keywords_rewrites_only_the_keywords_and_l0_follows(root):
    path = root / ZH_LIMIT_REQ
    before = path.read_bytes()
    at = documents_page("Keyword map")
    at.radio(key="kw_filter").set_value("All keywords").run()  # twins only: not among the problems
    at = click_row(at, "keyword", "limit-req", table_with="hits for the bare keyword")
    next(s for s in at.selectbox if s.label == "Edit the keywords of").set_value(ZH_LIMIT_REQ).run()
    box = next(t for t in at.text_area if t.label == "Keywords (one per line)")
    assert box.value.splitlines() == ["Apache Lumen", "插件", "limit-req", "限流"]
    box.set_value("Apache Lumen\n插件\n限流\n漏桶限流\n").run()
    assert not at.exception, at.exception
    assert any(f"{ZH_LIMIT_REQ}" in e.label for e in at.expander)  # the upload preview of the rewritten file
    assert any("replaces the existing" in i.value for i in at.info)
    assert path.read_bytes() == before  # the preview writes nothing
    at.button(key="kw-save").click().run()
    assert not at.exception, at.exception
    assert any("keywords saved" in s.value for s in at.success)

    expected = before.replace("  - limit-req\n  - 限流\n".encode(), "  - 限流\n  - 漏桶限流\n".encode())
    assert expected != before and path.read_bytes() == expected  # every other byte as it was
    _, keywords = table(at, "hits for the bare keyword")
    assert set(keywords.set_index("keyword").loc[["limit-req"], "hits for the bare keyword"]) == {1}

    at.switch_page("../../pages/playground.py").run()
    for query, source in (("limit-req", EN_LIMIT_REQ), ("漏桶限流", ZH_LIMIT_REQ)):
        at.text_input(key="query").set_value(query)
        at.button[0].click().run()
        raw = at.code[0].value
        assert f'"source": "{source}"' in raw and '"confidence": "high"' in raw, (query, raw)


# -- documents and the inspector ------------------------------------------------------------------------------
def test_the_category_filter_is_a_tree_of_folders(root):
    from kb_core import load_settings, open_knowledge_base

    tree = {  # a docs site copied into the folder, as git clone or cp -r leaves it
        "apisix/docs/en/latest/getting-started.md": doc("Getting started", ["install apisix"]),
        "apisix/docs/en/latest/plugins/limit-req.md": doc("limit-req", ["limit-req plugin"]),
        "apisix/docs/zh/latest/getting-started.md": doc("快速入门", ["安装 apisix"]),
        "apisix/docs/zh/latest/plugins/limit-req.md": doc("limit-req 插件", ["limit-req 插件"]),
        "apisix/docs-old/legacy.md": doc("Legacy", ["legacy apisix"]),  # a sibling, not below apisix/docs
    }
    for relative, text in tree.items():
        write_doc(root, f"knowledge_base/{relative}", text)
    kb = open_knowledge_base(load_settings())
    try:
        assert sorted(kb.documents.reconcile().added) == sorted(f"knowledge_base/{r}" for r in tree)
    finally:
        kb.close()

    at = documents_page()
    box = at.multiselect(key="filter_category")
    options = list(box.options)
    assert options[:9] == ["apisix", "apisix/docs", "apisix/docs/en", "apisix/docs/en/latest",
                           "apisix/docs/en/latest/plugins", "apisix/docs/zh", "apisix/docs/zh/latest",
                           "apisix/docs/zh/latest/plugins", "apisix/docs-old"]  # tree order: a folder, then below it
    assert {"gateway", "gateway-zh", "ops"} <= set(options)

    def files_shown(*folders: str) -> set[str]:
        at.multiselect(key="filter_category").set_value(list(folders)).run()
        assert not at.exception, at.exception
        files = set(table(at, "file")[1]["file"])
        assert any(c.value.startswith(f"{len(files)} of ") for c in at.caption)
        return files

    assert files_shown("apisix/docs") == {f"knowledge_base/{r}" for r in tree if r.startswith("apisix/docs/")}
    assert files_shown("apisix") == {f"knowledge_base/{r}" for r in tree}
    zh_and_ops = files_shown("apisix/docs/zh", "ops")
    assert {"knowledge_base/apisix/docs/zh/latest/getting-started.md", RUNBOOK} <= zh_and_ops
    assert all(f.startswith(("knowledge_base/apisix/docs/zh/", "knowledge_base/ops/")) for f in zh_and_ops)
    gateway = files_shown("gateway")  # a flat category as before: its own documents, not gateway-zh's
    assert EN_LIMIT_REQ in gateway and ZH_LIMIT_REQ not in gateway


def test_clicking_a_row_inspects_it_and_its_chunks_can_be_searched(root):
    at = click_row(documents_page(), "file", EN_LIMIT_REQ)
    assert "limit-req" in [h.value for h in at.subheader]
    assert {"Content", "Frontmatter", "Raw file", "Chunks"} <= {t.label for t in at.tabs}
    raw = next(c.value for c in at.code)
    assert raw == (root / EN_LIMIT_REQ).read_text(encoding="utf-8").rstrip("\n")  # st.code drops the last break
    assert "Licensed to the Apache" in raw and "## Description {#description}" in raw  # the Raw tab: the file
    content = next(m.value for m in at.markdown if "## Description" in m.value)  # the Content tab: as answered
    assert "## Description\n" in content and "{#" not in content and "Licensed" not in content
    doc_id = int(table(at, "file")[1].set_index("file").loc[EN_LIMIT_REQ, "id"])
    search = at.text_input(key=f"chunk-search-{doc_id}")
    total = int(next(c.value for c in at.caption if " chunks" in c.value and " of " in c.value).split(" of ")[1]
                .split()[0])
    search.set_value("nodelay").run()
    caption = next(c.value for c in at.caption if "contain “nodelay”" in c.value)
    found = int(caption.split(" of ")[0])
    assert 0 < found < total
    assert len([e for e in at.expander if e.label.startswith("#")]) == found
    assert not any("{#" in e.label for e in at.expander)  # chunk headings are cleaned too


def test_other_frontmatter_fields_are_rendered_as_a_table(root):
    at = click_row(documents_page(), "file", EXTRA)
    fields = at.table[0].value.set_index("field")["value"].to_dict()
    assert fields["keywords"] == "plugin_attr, plugin config, 插件配置"
    assert fields["sidebar_position"] == "4" and fields["tags"] == "config, reload"
    assert fields["sections"] == '{"reload": "Reloading plugins", "attrs": "Global attributes"}'


def test_a_document_without_frontmatter_is_marked_l1_only_and_titled_by_its_file(root):
    at = documents_page()
    _, rows = table(at, "file")
    row = rows.set_index("file").loc[RUNBOOK]
    assert row["title"] == "runbook-high-latency.md" and row["found by"] == "L1 only"
    at = click_row(at, "file", RUNBOOK)
    assert "runbook-high-latency.md" in [h.value for h in at.subheader]
    assert "L1 only" in markdown_text(at)  # st.badge
    assert any("reachable through L1 only" in w.value for w in at.warning)


def test_deleting_from_the_inspector_confirms_next_to_the_button(root):
    at = click_row(documents_page(), "file", EXTRA)
    doc_id = int(table(at, "file")[1].set_index("file").loc[EXTRA, "id"])
    at.button(key=f"delete-{doc_id}").click().run()
    assert f"Delete `{EXTRA}`? Its file goes to the trash for 30 days" in at.warning[0].value
    assert (root / EXTRA).exists()
    at.button(key=f"confirm-delete-{doc_id}").click().run()
    assert not at.exception, at.exception
    assert f"deleted {EXTRA}" in at.success[0].value
    assert EXTRA not in set(table(at, "file")[1]["file"])
    assert not (root / EXTRA).exists()
    assert "doc" not in at.query_params  # the link went with the document


def test_documents_whose_file_is_gone_are_removed_by_reconcile_when_asked(root):
    (root / EN_LIMIT_REQ).unlink()
    (root / RUNBOOK).unlink()
    count = len(table(documents_page(), "file")[1])
    at = documents_page("Maintenance")
    warning = next(w.value for w in at.warning if "file has gone" in w.value)
    assert EN_LIMIT_REQ in warning and RUNBOOK in warning and "Reconcile" in warning
    at.button(key="reconcile").click().run()  # without the tick: reported, kept
    assert not at.exception, at.exception
    assert any("started as job" in i.value for i in at.info)  # a job on the server
    finish_jobs(at, root)
    assert "0 removed; 2 rows without a file" in at.success[0].value
    at.checkbox(key="delete-missing").check().run()
    at.button(key="reconcile").click().run()
    finish_jobs(at, root)
    assert "2 removed" in at.success[0].value
    removed = {i.value for i in at.info}
    assert {f"removed from the index: {EN_LIMIT_REQ}", f"removed from the index: {RUNBOOK}"} <= removed
    at = documents_page()
    assert not [w for w in at.warning if "file has gone" in w.value]
    files = set(table(at, "file")[1]["file"])
    assert len(files) == count - 2 and EN_LIMIT_REQ not in files and ZH_LIMIT_REQ in files


def test_reconcile_picks_up_a_copied_tree_and_lists_each_refused_file_once_with_its_reason(root):
    write_doc(root, "knowledge_base/apisix/docs/en/latest/plugins/limit-req.md", doc("limit-req", ["limit-req"]))
    write_doc(root, "knowledge_base/apisix/docs/en/my plugins/draft.md", doc("Draft", ["draft"]))  # a space
    write_doc(root, "knowledge_base/stray.md", doc("Stray", ["stray"]))  # not in a category folder
    at = documents_page("Maintenance")
    at.button(key="reconcile").click().run()
    finish_jobs(at, root)
    assert "1 files added" in at.success[0].value and "2 .md files refused by the path rule" in at.success[0].value
    assert any(w.value.startswith("2 .md file(s) are not indexed") for w in at.warning)
    refused = next(f.value for f in at.dataframe if "why" in f.value.columns).set_index("file")["why"].to_dict()
    assert set(refused) == {"knowledge_base/apisix/docs/en/my plugins/draft.md", "knowledge_base/stray.md"}
    assert "'my plugins' is not allowed" in refused["knowledge_base/apisix/docs/en/my plugins/draft.md"]
    assert refused["knowledge_base/stray.md"].startswith("not in a category folder")
    files = set(table(documents_page(), "file")[1]["file"])
    assert "knowledge_base/apisix/docs/en/latest/plugins/limit-req.md" in files


def test_every_document_shows_its_language_and_the_list_filters_by_it(root):
    at = documents_page()
    _, rows = table(at, "file")
    lang = dict(zip(rows["file"], rows["lang"], strict=True))
    assert lang[ZH_LIMIT_REQ] == "zh" and lang[EN_LIMIT_REQ] == "en"
    assert lang[RUNBOOK] == "en"  # no frontmatter (not in L0): from its path and text, English
    at.multiselect(key="filter_language").set_value(["zh"]).run()
    assert not at.exception, at.exception
    files = set(table(at, "file")[1]["file"])
    assert ZH_LIMIT_REQ in files and EN_LIMIT_REQ not in files
    assert files == {f for f, language in lang.items() if language == "zh"}


# -- a click anywhere on a row, `?doc=` links, select-all into the trash, the Trash tab -------------------------
def click_cell(at: AppTest, column: str, value: str, *, cell: str | None = None) -> AppTest:
    """Click one cell (in column `cell`, default `column`) of the row whose `column` equals `value`, as a click
    on it in the browser does: no checkbox."""
    frame, rows = table(at, column)
    index = list(rows[column]).index(value)
    at.session_state[frame.key] = {"selection": {"rows": [], "columns": [], "cells": [[index, cell or column]]}}
    at.run()
    assert not at.exception, at.exception
    return at


def linked_page(doc_param: str) -> AppTest:
    """The Documents page opened at `/documents?doc=<doc_param>` in a fresh session."""
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.query_params["doc"] = doc_param
    at.switch_page("../../pages/documents.py").run()
    assert not at.exception, at.exception
    return at


def test_a_click_on_any_cell_opens_the_inspector_and_puts_the_document_in_the_url(root):
    at = click_cell(documents_page(), "file", EXTRA, cell="title")
    assert "Plugin configuration" in [h.value for h in at.subheader]
    assert at.query_params.get("doc") == "gateway/plugin-config.md"
    at = click_cell(at, "file", EN_LIMIT_REQ, cell="keywords")  # another row: the inspector and the link follow
    assert "limit-req" in [h.value for h in at.subheader] and "Plugin configuration" not in at.subheader.values
    assert at.query_params.get("doc") == "gateway/limit-req.md"
    frame, _ = table(at, "file")
    at.session_state[frame.key] = {"selection": {"rows": [], "columns": [], "cells": []}}  # unselected
    at.run()
    assert not at.exception, at.exception
    assert "limit-req" not in [h.value for h in at.subheader] and "doc" not in at.query_params


def test_a_doc_link_opens_that_documents_inspector(root):
    at = linked_page("gateway/plugin-config.md")
    assert "Plugin configuration" in [h.value for h in at.subheader]
    assert {"Content", "Frontmatter", "Raw file", "Chunks"} <= {t.label for t in at.tabs}
    frame, rows = table(at, "file")
    assert at.session_state[frame.key]["selection"]["rows"] == [list(rows["file"]).index(EXTRA)]  # its row
    assert at.query_params.get("doc") == "gateway/plugin-config.md"
    # a path as the list shows it works too; Chinese and nested paths as well
    at = linked_page(ZH_LIMIT_REQ)
    assert at.query_params.get("doc") == "gateway-zh/limit-req.md"
    assert any("limit-req" in h.value for h in at.subheader) and at.code[0].value.startswith("---")


def test_a_doc_link_to_an_unknown_path_says_so(root):
    at = linked_page("gateway/no-such-page.md")
    assert any("No document at `gateway/no-such-page.md`" in w.value and "Trash" in w.value for w in at.warning)
    assert not [t for t in at.tabs if t.label == "Raw file"]
    at = linked_page("../../etc/passwd")
    assert any("No document at" in w.value for w in at.warning)


def test_select_all_shown_moves_the_filtered_documents_to_the_trash(root):
    at = documents_page()
    at.multiselect(key="filter_category").set_value(["gateway-zh"]).run()
    files = set(table(at, "file")[1]["file"])
    assert len(files) > 3 and all(f.startswith("knowledge_base/gateway-zh/") for f in files)
    at.checkbox(key="bulk_all").check().run()
    at.button(key="bulk-delete").click().run()
    assert not at.exception, at.exception
    warning = next(w.value for w in at.warning if w.value.startswith("Move "))
    assert warning.startswith(f"Move {len(files)} document(s) to the trash?") and ZH_LIMIT_REQ in warning
    assert (root / ZH_LIMIT_REQ).exists()  # nothing before the confirmation
    next(b for b in at.button if b.label == "Confirm delete").click().run()
    assert not at.exception, at.exception
    assert any(f"moved {len(files)} documents to the trash" in s.value for s in at.success)
    assert not any((root / f).exists() for f in files)
    assert at.checkbox(key="bulk_all").value is False
    at = documents_page("Trash")
    trashed = table(at, "deleted (UTC)")[1]
    assert set(trashed["file"]) == files and set(trashed["by"]) == {"console"}  # the console's user


def test_the_trash_tab_restores_and_asks_before_replacing(root):
    original = (root / EXTRA).read_bytes()
    at = click_row(documents_page(), "file", EXTRA)
    doc_id = int(table(at, "file")[1].set_index("file").loc[EXTRA, "id"])
    at.button(key=f"delete-{doc_id}").click().run()
    at.button(key=f"confirm-delete-{doc_id}").click().run()
    assert not (root / EXTRA).exists()

    at = documents_page("Trash")
    assert any("1 deleted document(s)" in c.value for c in at.caption)
    at = click_cell(at, "file", EXTRA, cell="deleted (UTC)")
    restore = next(b for b in at.button if b.label == "Restore")
    restore.click().run()
    assert not at.exception, at.exception
    assert any(f"restored {EXTRA} (indexed)" in s.value for s in at.success)
    assert (root / EXTRA).read_bytes() == original
    assert any("The trash is empty" in i.value for i in at.info)
    at = documents_page()
    assert EXTRA in set(table(at, "file")[1]["file"])

    # deleted again, and a new file put at its path meanwhile: Restore asks first
    doc_id = int(table(at, "file")[1].set_index("file").loc[EXTRA, "id"])
    at = click_row(at, "file", EXTRA)
    at.button(key=f"delete-{doc_id}").click().run()
    at.button(key=f"confirm-delete-{doc_id}").click().run()
    write_doc(root, EXTRA, doc("Plugin configuration v2", ["plugin_attr"]))
    at = click_row(documents_page("Trash"), "file", EXTRA, table_with="deleted (UTC)")
    next(b for b in at.button if b.label == "Restore").click().run()
    assert not at.exception, at.exception
    assert any("exists again" in w.value and "Replace it" in w.value for w in at.warning)
    assert "Plugin configuration v2" in (root / EXTRA).read_text(encoding="utf-8")  # asked, nothing written
    next(b for b in at.button if b.label == "Replace").click().run()
    assert not at.exception, at.exception
    assert any(f"restored {EXTRA}" in s.value for s in at.success)  # over a file put there by hand
    assert (root / EXTRA).read_bytes() == original


def test_the_trash_tab_purges_after_asking(root):
    at = click_row(documents_page(), "file", EXTRA)
    doc_id = int(table(at, "file")[1].set_index("file").loc[EXTRA, "id"])
    at.button(key=f"delete-{doc_id}").click().run()
    at.button(key=f"confirm-delete-{doc_id}").click().run()
    at = click_row(documents_page("Trash"), "file", EXTRA, table_with="deleted (UTC)")
    next(b for b in at.button if b.label == "Purge…").click().run()
    assert any(f"Purge `{EXTRA}` for good" in w.value for w in at.warning)
    assert any((root / "kb_trash").iterdir())
    next(b for b in at.button if b.label == "Confirm purge").click().run()
    assert not at.exception, at.exception
    assert any(f"purged {EXTRA}" in s.value for s in at.success)
    assert not any((root / "kb_trash").iterdir())
    assert any("The trash is empty" in i.value for i in at.info)


def test_a_keyword_plan_job_shows_its_progress_and_is_cancelled_from_the_keyword_map(root):
    """A plan applied by another process shows in the map's jobs panel; its Cancel stops it between two documents,
    and every store agrees afterwards."""
    import threading

    from support.stores import assert_consistent

    from kb_core import JobState, open_knowledge_base

    other = open_knowledge_base(make_settings(root))
    try:
        paths = [other.documents.upload(f"plan-{i}.md", doc(f"Plan {i}", ["PLANJOB", f"PLAN_{i}"]).encode(), "ops")
                 .document.file_path for i in range(6)]
        reached, release, saves = threading.Event(), threading.Event(), []
        real = other.documents.save_edit

        def save(edit, **kwargs):  # hold the job inside its second document
            saves.append(edit.file_path)
            if len(saves) == 2:
                reached.set()
                assert release.wait(120)
            return real(edit, **kwargs)

        other.documents.save_edit = save
        job = other.jobs.start("keyword_plan", plan=other.keywords.prepare_removal("PLANJOB"))
        assert reached.wait(120)
        at = documents_page("Keyword map")
        panel = " ".join(m.value for m in at.markdown)
        assert f"**Keyword plan** · job {job.id} · running" in panel
        at.button(key=f"cancel-job-{job.id}").click().run()
        assert not at.exception, at.exception
        assert other.jobs.get(job.id).cancel_requested
        for _flush in range(2):  # the job's own flusher has read the request (it writes the row, then reads it)
            seen = other.jobs.get(job.id).updated_at
            deadline = time.monotonic() + 60
            while other.jobs.get(job.id).updated_at <= seen and time.monotonic() < deadline:
                time.sleep(0.05)
        release.set()  # the second document is saved whole; the third is never started
        ended = other.jobs.wait(job.id, 120)
        assert ended.state == JobState.CANCELLED and ended.summary == "cancelled after 2 of 6"
        assert [r["document"] for r in ended.result["rows"]] == paths[:2]
        assert [other.keywords.of(p) for p in paths] == [
            (f"PLAN_{i}",) if i < 2 else ("PLANJOB", f"PLAN_{i}") for i in range(6)]
        assert_consistent(other)
    finally:
        release.set()
        other.close()


def test_the_trash_tab_purges_old_documents_as_a_job(root):
    import json
    from datetime import UTC, datetime, timedelta

    at = click_row(documents_page(), "file", EXTRA)
    doc_id = int(table(at, "file")[1].set_index("file").loc[EXTRA, "id"])
    at.button(key=f"delete-{doc_id}").click().run()
    at.button(key=f"confirm-delete-{doc_id}").click().run()
    [record] = (root / "kb_trash").glob("*/.trashinfo.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    data["deleted_at"] = (datetime.now(UTC) - timedelta(days=31)).isoformat()  # deleted a month ago
    record.write_text(json.dumps(data), encoding="utf-8")
    at = documents_page("Trash")
    at.button(key="purge-old").click().run()
    assert not at.exception, at.exception
    finish_jobs(at, root)
    assert any("Trash purge (job" in s.value and "1 document(s) deleted 30 days ago or earlier purged" in s.value
               for s in at.success), [s.value for s in at.success]
    assert not any((root / "kb_trash").iterdir())
    assert any("The trash is empty" in i.value for i in at.info)


# -- editing in place: the inspector's Edit tab and the keyword map's bulk operations ----------------------------
def _form_input(at: AppTest, label: str):
    return next(w for w in [*at.text_input, *at.text_area] if w.label == label)


def _submit(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def test_the_inspector_edits_title_summary_keywords_and_sections_in_place(root):
    path = root / EXTRA
    before = path.read_bytes()
    at = click_row(documents_page(), "file", EXTRA)
    assert "Edit" in {t.label for t in at.tabs}
    assert _form_input(at, "Title").value == "Plugin configuration"
    assert _form_input(at, "Sections (one per line: name: heading line)").value == \
        "reload: Reloading plugins\nattrs: Global attributes"
    _form_input(at, "Title").set_value("Plugin configuration and reloads")
    _form_input(at, "Keywords (one per line)").set_value("plugin_attr\nplugin config\n插件配置\nplugin reload")
    _form_input(at, "Sections (one per line: name: heading line)").set_value(
        "reload: Reloading plugins\nattributes: Global attributes")
    at = _submit(at, "Preview changes")
    diff = next(c.value for c in at.code if c.language == "diff")
    lines = diff.splitlines()
    assert {"-title: Plugin configuration", "+title: Plugin configuration and reloads",
            '+keywords: [plugin_attr, "plugin config", 插件配置, plugin reload]', "-  attrs: Global attributes",
            "+  attributes: Global attributes"} <= set(lines)
    assert not [line for line in lines if line.startswith(("-", "+")) and "summary" in line]  # not edited
    assert any(EXTRA in e.label for e in at.expander)  # the upload preview of the rewritten file
    assert path.read_bytes() == before  # a preview writes nothing
    at.button(key=next(b.key for b in at.button if b.label == "Save and re-index")).click().run()
    assert not at.exception, at.exception
    assert any("title, keywords, sections saved in place and the document replaced" in s.value for s in at.success)
    edit_tab = next(t for t in at.tabs if t.label == "Edit")  # said where the Save click leaves the curator
    assert any("saved in place" in s.value for s in edit_tab.success)
    after = path.read_text(encoding="utf-8")
    expected = before.decode().replace("title: Plugin configuration\n", "title: Plugin configuration and reloads\n") \
        .replace("插件配置]", "插件配置, plugin reload]").replace("  attrs: Global", "  attributes: Global")
    assert after == expected  # the comment, key order and body byte for byte
    at = click_row(documents_page(), "file", EXTRA)
    assert "Plugin configuration and reloads" in [h.value for h in at.subheader]
    fields = at.table[0].value.set_index("field")["value"].to_dict()
    assert fields["sections"] == '{"reload": "Reloading plugins", "attributes": "Global attributes"}'


def test_an_inspector_edit_of_a_file_changed_meanwhile_is_refused(root):
    path = root / EXTRA
    at = click_row(documents_page(), "file", EXTRA)
    _form_input(at, "Summary").set_value("Where plugin attributes live.")
    at = _submit(at, "Preview changes")
    newer = path.read_text(encoding="utf-8").replace("A reload", "A hot reload")  # someone, meanwhile
    path.write_text(newer, encoding="utf-8")
    at.button(key=next(b.key for b in at.button if b.label == "Save and re-index")).click().run()
    assert not at.exception, at.exception
    assert any("changed on disk since the preview" in e.value and "nothing was written" in e.value
               for e in at.error)
    assert path.read_text(encoding="utf-8") == newer
    bad = _form_input(at, "Title")
    bad.set_value("")  # allowed: a warning, not an error
    _form_input(at, "Sections (one per line: name: heading line)").set_value("no separator here")
    at = _submit(at, "Preview changes")
    assert any("write a section as `name: heading line`" in e.value.replace("\\", "") for e in at.error)


def test_a_keyword_is_renamed_across_documents_from_the_map_with_an_outcome_per_document(root):
    kestrel, gateway = root / "knowledge_base/faq/kestrel-faq.md", root / "knowledge_base/faq/gateway-faq.md"
    at = click_row(documents_page("Keyword map"), "keyword", "FAQ", table_with="hits for the bare keyword")
    at.radio(key=next(r.key for r in at.radio if r.label == "Operation")).set_value("Rename").run()
    next(t for t in at.text_input if t.label == "New keyword").set_value("常见问题解答").run()
    at.button(key="kw-bulk-preview").click().run()
    assert not at.exception, at.exception
    assert any("rename “FAQ” to “常见问题解答” in 2 of 2 documents" in m.value for m in at.markdown)
    assert any("after the rename 2 pages claim “常见问题解答”" in w.value for w in at.warning)
    plan = next(f.value for f in at.dataframe if "will be" in f.value.columns)
    assert set(plan["document"]) == {"knowledge_base/faq/kestrel-faq.md", "knowledge_base/faq/gateway-faq.md"}
    assert dict(zip(plan["document"], plan["after"], strict=True))["knowledge_base/faq/kestrel-faq.md"] == \
        "Kestrel, 常见问题, 常见问题解答"
    assert "  - FAQ\n" in kestrel.read_text(encoding="utf-8")  # a plan writes nothing
    gateway.write_text(gateway.read_text(encoding="utf-8").replace("mailing list", "mailing lists"),
                       encoding="utf-8")  # someone edits one of them meanwhile
    at.button(key="kw-bulk-apply").click().run()  # one job on the server
    assert not at.exception, at.exception
    finish_jobs(at, root)
    assert any("rename “FAQ” to “常见问题解答”: 1 saved, 1 skipped, 0 failed" in w.value for w in at.warning)
    outcomes = next(f.value for f in at.dataframe if "outcome" in f.value.columns).set_index("document")
    assert outcomes.loc["knowledge_base/faq/kestrel-faq.md", "outcome"] == "saved"
    assert outcomes.loc["knowledge_base/faq/gateway-faq.md", "outcome"] == "skipped"
    assert "changed on disk since the preview" in outcomes.loc["knowledge_base/faq/gateway-faq.md", "detail"]
    assert "  - 常见问题解答\n" in kestrel.read_text(encoding="utf-8")
    assert "  - FAQ\n" in gateway.read_text(encoding="utf-8") and "mailing lists" in gateway.read_text(encoding="utf-8")
    next(b for b in at.button if b.label == "Dismiss").click().run()
    assert not [f for f in at.dataframe if "outcome" in f.value.columns]

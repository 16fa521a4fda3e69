"""The console pages, rendered with Streamlit's AppTest against real stores (SQLite, Milvus Lite)."""

from __future__ import annotations

import ast

import pytest
from streamlit.testing.v1 import AppTest
from support.console import APP, finish_jobs, history_shown, look_up, run_page, shown, wait_for_jobs
from support.documents import doc, write_doc
from support.paths import REPO

PAYMENT = "knowledge_base/api/payment-errors.md"


@pytest.mark.parametrize("page", ["playground", "documents", "upload", "tool_calls", "settings", "evaluation"])
def test_every_page_renders_without_exception_and_with_the_sidebar(app_root, page):
    at = run_page(page)
    assert not at.exception, at.exception
    assert at.title[0].value
    assert [m.label for m in at.sidebar.metric] == ["L0", "Database", "Milvus"]


def test_a_page_that_fails_unexpectedly_still_has_the_sidebar_status(app_root, monkeypatch):
    """A bug in a page (an error kb_core does not raise): Streamlit shows it, and the sidebar is drawn all the
    same (the status on every page, whatever the page does)."""
    from kb_core.services.documents import Documents

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the page")

    monkeypatch.setattr(Documents, "list", broken)
    at = run_page("documents")
    assert at.exception and "a bug in the page" in at.exception[0].message
    assert [m.label for m in at.sidebar.metric] == ["L0", "Database", "Milvus"]


@pytest.mark.parametrize(("page", "owner", "method"), [("documents", "documents", "list"),
                                                     ("settings", "knowledge_base", "about"),
                                                     ("evaluation", "evaluation", "sets")])
def test_a_page_that_ends_early_still_has_the_sidebar_status(app_root, monkeypatch, page, owner, method):
    """A page that stops on an error (or, like Evaluation, with fewer than two runs) ends with `end_page()`,
    not `st.stop()`: app.py still draws the status after it."""
    from kb_core import KnowledgeBase, KnowledgeBaseError
    from kb_core.evaluation.service import Evaluation
    from kb_core.services.documents import Documents

    def broken(*args, **kwargs):
        raise KnowledgeBaseError("the database is away")

    owners = {"documents": Documents, "knowledge_base": KnowledgeBase, "evaluation": Evaluation}
    monkeypatch.setattr(owners[owner], method, broken)
    at = run_page(page)
    assert not at.exception, at.exception
    assert any("database is away" in e.value for e in at.error), "the page did not take its early end"
    assert [m.label for m in at.sidebar.metric] == ["L0", "Database", "Milvus"]


def test_the_console_watches_the_folder_by_default(app_root, monkeypatch):
    monkeypatch.delenv("KB_WATCH")  # recorded by the fixture's setenv: app.py's default is undone afterwards
    at = run_page("playground")
    assert not at.exception, at.exception
    assert any("watched by this process" in c.value for c in at.sidebar.caption)


def test_sidebar_shows_store_counts_and_model_state(synced_sample):
    at = run_page("playground")
    metrics = {m.label: m.value for m in at.sidebar.metric}
    assert metrics == {"L0": "9", "Database": "10", "Milvus": "10"}
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "sqlite:///" in captions and "kb_milvus.db" in captions
    assert "L1 runs on full text only" in captions


def test_sidebar_says_plainly_what_is_not_indexed(app_root, sample_root):
    at = run_page("documents")  # files on disk, nothing synced yet; the sidebar is on every page
    assert [i.value for i in at.sidebar.info] == ["10 documents in the folder are not indexed yet."]
    assert not [w for w in at.sidebar.warning if "Mismatch" in w.value or "files on disk" in w.value]


def test_a_page_file_run_on_its_own_goes_through_app_py(app_root):
    """AppTest on app.py itself re-detects pages/ beside it at every run, so Streamlit runs pages/upload.py on its
    own, as a fresh server does for a deep link: the page hands the run over to app.py (see pages/__init__.py)."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.switch_page("pages/upload.py").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["⬆️ Upload documents"]  # once: the page ran inside app.py only
    assert [m.label for m in at.sidebar.metric] == ["L0", "Database", "Milvus"]


def test_every_page_script_is_a_navigation_page_named_by_its_file():
    """The legacy pages/ mode finds a fresh server's deep link only by file name: the top-level pages/*.py are
    exactly app.py's st.Page scripts, and none sets a url_path that the legacy mode would not know."""
    calls = [node for node in ast.walk(ast.parse((REPO / "app.py").read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and ast.unparse(node.func) == "st.Page"]
    assert [ast.unparse(call.args[0].left) for call in calls] == ["PAGES"] * len(calls)
    assert sorted(call.args[0].right.value for call in calls) == sorted(
        path.name for path in (REPO / "pages").glob("*.py") if path.name != "__init__.py")
    assert [ast.unparse(call) for call in calls if any(k.arg == "url_path" for k in call.keywords)] == []


def test_invalid_settings_show_an_error_instead_of_a_traceback(app_root, monkeypatch):
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", "-5")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert "KB_MAX_UPLOAD_BYTES" in at.error[0].value
    assert any("did not open" in e.value for e in at.sidebar.error)  # the sidebar does not go blank


# -- upload -> documents -> delete -----------------------------------------------------------------------------
def test_two_uploaded_files_show_up_in_documents_and_one_can_be_deleted(app_root):
    at = run_page("upload")
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value([
        ("payment-errors.md", doc("支付网关错误码定义", ["ERR_TIMEOUT", "超时"]).encode(), "text/markdown"),
        ("refunds.md", doc("Refund API", ["RefundService"]).encode(), "text/markdown"),
    ])
    at.run()
    assert not at.exception
    assert len(at.expander) == 2  # one preview per file
    at.button[0].click().run()
    finish_jobs(at)
    results = at.dataframe[0].value
    assert list(results["result"]) == ["indexed", "indexed"]

    at.switch_page("../../pages/documents.py").run()
    table = at.dataframe[0].value
    assert set(table["file"]) == {"knowledge_base/api/payment-errors.md", "knowledge_base/api/refunds.md"}

    frame = at.dataframe[0]  # a click on the row inspects the document
    at.session_state[frame.key] = {"selection": {"rows": [list(table["id"]).index(2)], "columns": [], "cells": []}}
    at.run()
    at.button(key="delete-2").click().run()
    assert "goes to the trash" in at.warning[0].value
    at.button(key="confirm-delete-2").click().run()
    assert not at.exception
    assert "deleted knowledge_base/api/refunds.md" in at.success[0].value
    assert set(at.dataframe[0].value["file"]) == {"knowledge_base/api/payment-errors.md"}
    assert not (app_root / "knowledge_base/api/refunds.md").exists()


def test_upload_preview_lints_before_writing(synced_sample):
    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value([
        ("dup.md", doc("Another timeout doc", ["超时", "NEW_KW"]).encode(), "text/markdown"),
        ("nofm.md", b"# Just text\n\nbody\n", "text/markdown"),
        ("timeout.md", doc("Timeout v2", ["SocketTimeoutException"]).encode(), "text/markdown"),
        ("bad.md", b"\xff\xfe binary", "text/markdown"),
    ])
    at.run()
    warnings = " | ".join(w.value for w in at.warning)
    [clash] = [e for e in at.expander if e.label.startswith("⚠️ 超时 — ")]  # grouped per keyword
    assert clash.label == "⚠️ 超时 — 2 documents (1 of this batch)"
    assert "knowledge_base/api/payment-errors.md" in clash.markdown[0].value
    assert "no frontmatter" in warnings
    assert any("replaces the existing knowledge_base/troubleshooting/timeout.md" in i.value for i in at.info)
    assert any("not UTF-8" in e.value for e in at.error)
    assert not (synced_sample / "knowledge_base/troubleshooting/dup.md").exists()  # preview writes nothing
    assert at.button[0].label == "Upload 2 file(s)"  # timeout.md exists: replaced only when ticked
    at.checkbox[0].check().run()
    assert at.button[0].label == "Upload 3 file(s)"


def test_new_category_is_validated(app_root):
    at = run_page("upload")
    at.selectbox(key="category").set_value("➕ New category…").run()
    at.text_input(key="new_category").set_value("Bad Category!")
    at.file_uploader(key="files").set_value([("a.md", doc("A", ["a"]).encode(), "text/markdown"),
                                             ("b.md", doc("B", ["b"]).encode(), "text/markdown")]).run()
    assert [shown(e.value) for e in at.error if "invalid category" in e.value] == [  # once, not once per file
        "invalid category 'Bad Category!' (the folder name 'Bad Category!' is not allowed): use folder names of "
        "1-64 letters, digits, '-', '_' or '.' (not starting with '.' or '-'), separated by '/', at most 16 levels "
        "and 255 characters (e.g. api, or apisix/docs/en/latest/plugins); did you mean 'bad-category'?"]
    assert next(b for b in at.button if b.label.startswith("Upload")).disabled


# -- playground ------------------------------------------------------------------------------------------------
def test_playground_unique_l0_hit_shows_primary_only(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    markdown = " ".join(m.value for m in at.markdown)
    assert "exact_L0" in markdown and "confidence: high" in markdown and PAYMENT in markdown
    assert any("L1 was not called" in c.value for c in at.caption)
    assert "unique L0 hit" in markdown
    assert '"matchType": "exact_L0"' in at.code[0].value
    assert '"supplement": null' in at.code[0].value


def test_playground_several_hits_show_primary_supplement_and_why(synced_sample):
    at = look_up(run_page("playground"), "超时")
    markdown = " ".join(m.value for m in at.markdown)
    assert "confidence: low" in markdown and "semantic_L1" in markdown
    assert "several L0 hits" in markdown
    assert ":orange-background[**超时**]" in markdown  # the matched keyword is highlighted
    alternatives, hits = (frame.value for frame in at.dataframe)  # the answer is unsure: alternatives first
    assert "bm25" in " ".join(hits["found by"])
    assert set(alternatives.columns) == {"source", "title", "lang", "why"} and len(alternatives) >= 1
    assert "Decided by" in markdown and "found by bm25" in markdown


def test_playground_no_l0_hit_answers_from_l1_only(synced_sample):
    at = look_up(run_page("playground"), "如何优化缓存")
    markdown = " ".join(m.value for m in at.markdown)
    assert "no L0 hit" in markdown
    assert "knowledge_base/domain/cache-optimization.md" in markdown
    assert '"primary": null' in at.code[0].value


def test_playground_nothing_found(synced_sample):
    at = look_up(run_page("playground"), "完全不存在的内容XYZ")
    assert any("Nothing found" in w.value for w in at.warning)
    assert '"found": false' in at.code[0].value


def test_playground_recent_queries_can_be_rerun(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    look_up(at, "超时")
    assert history_shown(at) == ["`超时`", "`ERR_TIMEOUT`"]
    at.button(key="again-1").click().run()
    assert history_shown(at)[:2] == ["`ERR_TIMEOUT`", "`超时`"]
    assert "confidence: high" in " ".join(m.value for m in at.markdown)


def test_playground_section_chips_rerun_the_lookup_with_that_section(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    chip = at.button(key="chip-0")
    assert chip.label == "超时排查"  # the document's frontmatter `sections`
    chip.click().run()
    assert not at.exception, at.exception
    assert history_shown(at)[0] == "`ERR_TIMEOUT` · section `超时排查`"
    assert "section: 1. 超时类错误" in " ".join(m.value for m in at.markdown)
    assert '"section": "1. 超时类错误"' in at.code[0].value
    assert at.button(key="chip-0").proto.type == "primary"  # the chosen chip stands out
    at.button(key="chip-whole").click().run()
    assert history_shown(at)[0] == "`ERR_TIMEOUT`"
    assert '"section": null' in at.code[0].value
    at.switch_page("../../pages/tool_calls.py").run()
    assert list(at.dataframe[0].value["section"]) == ["", "超时排查 → 1. 超时类错误", ""]


def test_playground_a_new_query_clears_the_chosen_section(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    at.button(key="chip-0").click().run()
    assert at.text_input(key="section_title").value == "超时排查"
    look_up(at, "超时")
    assert at.text_input(key="section_title").value == ""
    assert history_shown(at)[0] == "`超时`"


def _chip_labels(node, inside_more: bool = False) -> tuple[list[str], list[str]]:
    """(chips shown, chips behind "more") under an element tree node."""
    shown: list[str] = []
    more: list[str] = []
    if getattr(node, "type", None) == "button" and str(getattr(node, "key", "")).startswith("chip-"):
        (more if inside_more else shown).append(node.label)
    for child in getattr(node, "children", {}).values():
        s, m = _chip_labels(child, inside_more or getattr(child, "type", None) == "popover")
        shown += s
        more += m
    return shown, more


def test_playground_shows_the_top_level_sections_and_a_dozen_chips_the_rest_behind_more(app_root, sample_root):
    from kb_core import load_settings, open_knowledge_base

    parts = []
    for t in range(1, 5):
        items = "\n\n".join(f"### Item {t}.{c}\n\nitem {t}.{c}" for c in range(1, 11))
        parts.append(f"## Part {t} {{#part-{t}}}\n\ntext {t}\n\n{items}")  # Docusaurus ids, cleaned away
    write_doc(sample_root, "knowledge_base/api/gateway-reference.md",
              doc("Gateway reference", ["GW_REFERENCE"], body="# Gateway reference\n\n" + "\n\n".join(parts)))
    kb = open_knowledge_base(load_settings())
    kb.documents.reconcile()
    kb.close()
    at = look_up(run_page("playground"), "GW_REFERENCE")
    shown, more = _chip_labels(at.main)
    assert shown[0] == "Whole document" and len(shown) == 1 + 12 and len(more) == 44 - 12
    assert {"Part 1", "Part 2", "Part 3", "Part 4"} <= set(shown)
    assert not any("{#" in label for label in shown + more)
    at.button(key="chip-43").click().run()  # the last one, behind "more"
    assert not at.exception, at.exception
    assert '"section": "Part 4 > Item 4.10"' in at.code[0].value
    shown, more = _chip_labels(at.main)
    assert "Part 4 > Item 4.10" in shown and at.button(key="chip-43").proto.type == "primary"  # brought forward


def test_playground_shows_the_note_for_a_section_that_does_not_exist(synced_sample):
    at = run_page("playground")
    at.text_input(key="section_title").set_value("退款")
    at = look_up(at, "ERR_TIMEOUT")
    assert any("no section '退款'; available: 超时排查" in i.value for i in at.info)


def test_playground_blank_query_shows_the_tool_error(synced_sample):
    at = look_up(run_page("playground"), "   ")
    assert "must not be empty" in at.error[0].value


def test_keyword_map_lists_collisions_first(synced_sample):
    at = run_page("documents", documents_tab="Keyword map")
    assert at.metric[0].value == "1"  # "超时" is claimed twice in the sample
    frames = [f.value for f in at.dataframe if "keyword" in f.value.columns]
    assert frames[0].iloc[0]["keyword"] == "超时"


# -- tool-call history ------------------------------------------------------------------------------------------
def test_tool_calls_page_lists_calls_misses_and_latency(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    look_up(at, "完全不存在的内容XYZ")
    look_up(at, "如何优化缓存")
    at.switch_page("../../pages/tool_calls.py").run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Calls"] == "3" and metrics["p50 latency"].endswith("ms") and metrics["p95 latency"].endswith("ms")
    misses, calls = at.dataframe[0].value, at.dataframe[1].value
    assert list(calls["query"]) == ["如何优化缓存", "完全不存在的内容XYZ", "ERR_TIMEOUT"]
    assert set(calls["caller"]) == {"console"}
    assert list(misses["query"]) == ["完全不存在的内容XYZ", "如何优化缓存"]

    at.selectbox(key="f_found").set_value("not found").run()
    assert list(at.dataframe[1].value["query"]) == ["完全不存在的内容XYZ"]


def test_sidebar_offers_to_sync_files_not_yet_indexed(app_root, sample_root):
    at = run_page("playground")
    at.sidebar.button(key="sidebar-sync").click().run()
    assert not at.exception, at.exception
    assert any("Reconcile started as job" in i.value for i in at.sidebar.info)
    finish_jobs(at, app_root)
    assert {m.label: m.value for m in at.sidebar.metric} == {"L0": "9", "Database": "10", "Milvus": "10"}
    assert not [w for w in at.sidebar.warning if "Mismatch" in w.value]


def test_the_settings_page_shows_settings_model_and_versions(app_root):
    at = run_page("settings")
    assert not at.exception, at.exception
    assert [s.value for s in at.main.subheader] == ["Model", "Settings", "Versions"]
    settings, versions = (frame.value for frame in at.main.dataframe)
    assert "KB_DATABASE_URL" in set(settings["setting"])
    assert {"python", "streamlit", "database", "milvus"} <= set(versions["part"])


def test_settings_offers_to_pull_the_configured_model_as_a_job(app_root, monkeypatch):
    """The configured model is not here, the built-in one stands in; the page says so and pulls the
    configured one as a job. Offline (HF_HUB_OFFLINE, as in these tests) the job fails saying what to do."""
    from support.stores import NO_MODEL

    monkeypatch.setenv("KB_EMBEDDING_FALLBACK", "use-multilingual-v3")
    at = run_page("settings")
    assert not at.exception, at.exception
    assert any(f"The configured model {NO_MODEL} is not on this machine" in shown(i.value) for i in at.info)
    button = next(b for b in at.button if b.label == f"Pull {NO_MODEL}")
    button.click().run()
    at = finish_jobs(at, app_root)
    text = " ".join(shown(e.value) for e in (*at.markdown, *at.error, *at.caption, *at.warning))
    assert "HF_HUB_OFFLINE is set in this process" in text, text
    # the pull has ended: the button is offered again
    assert any(b.label == f"Pull {NO_MODEL}" for b in at.button)


def test_settings_without_a_fallback_model_says_l1_is_full_text_only(app_root):
    at = run_page("settings")  # KB_EMBEDDING_FALLBACK=none in the tests' environment
    assert any("L1 runs on full text only" in shown(i.value) for i in at.info)


def test_did_you_mean_suggestions_are_buttons_that_ask_again(synced_sample):
    """A typo of an identifier keyword shows "did you mean" as buttons, not only in the raw JSON; one
    click asks the keyword it names."""
    at = run_page("playground")
    look_up(at, "ERR_TIMOUT 是什么意思")
    chips = [b for b in at.button if b.key and b.key.startswith("suggestion-")]
    assert chips and chips[0].label.startswith("ERR_TIMEOUT → "), [b.label for b in at.button]
    chips[0].click().run()
    assert not at.exception, at.exception
    assert at.text_input(key="query").value == "ERR_TIMEOUT"
    assert any('"confidence": "high"' in c.value for c in at.code)


def test_while_a_job_writes_the_sidebar_says_so_instead_of_a_disagreement(synced_sample):
    """Mid-job, the stores differ by the document the job is writing: the sidebar names the job, not a problem
    to reconcile - and names the problem again once no job writes."""
    import threading

    from kb_core import load_settings, open_knowledge_base
    from kb_core.bootstrap import parts_of
    from kb_core.jobs.model import JobKind

    other = open_knowledge_base(load_settings())  # another process's job, as far as the console can tell
    release = threading.Event()
    try:
        doc = other.documents.list()[0]
        parts_of(other).vectors.delete_document(doc.id)  # the stores now disagree by one document
        job = parts_of(other).jobs.submit(JobKind.UPLOAD, other.actor, {"files": 1},
                                             lambda control: release.wait(60) and "held", total=3)
        at = run_page("playground")
        assert not at.exception, at.exception
        infos = " ".join(i.value for i in at.sidebar.info)
        assert f"job {job.id} is" in infos and "agree again once it ends" in infos
        assert not [w for w in at.sidebar.warning if "run Reconcile" in w.value]
        release.set()
        wait_for_jobs(synced_sample)
        at.run()
        assert any("in Milvus: run Reconcile" in w.value for w in at.sidebar.warning)
    finally:
        release.set()
        other.close()


def test_a_reconcile_started_elsewhere_shows_in_the_playground_banner_instead_of_index_now(app_root, sample_root):
    """The sidebar's Reconcile now (or another tab, or the CLI) started the job: the playground's banner shows
    that job running instead of offering to index again, and says what it indexed once it ends."""
    import threading

    from kb_core import load_settings, open_knowledge_base
    from kb_core.bootstrap import parts_of
    from kb_core.jobs.model import JobKind

    other = open_knowledge_base(load_settings())  # another process's job, as far as the console can tell
    release = threading.Event()
    try:
        at = run_page("playground")
        assert not at.exception, at.exception
        assert [b for b in at.button if b.key == "index-now"]  # nothing indexed yet: the offer
        job = parts_of(other).jobs.submit(JobKind.RECONCILE, other.actor, {},
                                          lambda control: release.wait(60) and "held", total=3)
        at.run()
        assert not at.exception, at.exception
        assert not [b for b in at.button if b.key == "index-now"]
        assert any(f"job {job.id}" in shown(m.value) for m in at.markdown) or \
            any(f"job {job.id}" in c.value for c in at.caption)
    finally:
        release.set()
        other.close()


def _console_threads() -> list[str]:
    import threading

    return sorted(t.name for t in threading.enumerate() if t.name.startswith(("kb-", "milvus_lite")))


def test_clearing_the_resource_cache_closes_the_console_s_knowledge_base(app_root, sample_root):
    """Whoever clears Streamlit's resource cache (every AppTest run here, a server reloading its settings)
    closes the knowledge base it held: each run left its Milvus Lite server, follower and job threads behind
    (563 threads and 1,958 descriptors after the console tests, which slowed the rest of the suite to 40 min)."""
    import time
    from collections import Counter

    import streamlit as st

    before = Counter(_console_threads())

    def left() -> Counter:  # threads of this test's knowledge base still running
        return Counter(_console_threads()) - before

    at = run_page("playground")
    assert not at.exception, at.exception
    assert left()  # the open knowledge base runs its threads
    st.cache_resource.clear()
    deadline = time.monotonic() + 30
    while left() and time.monotonic() < deadline:  # (a thread being stopped ends on its own)
        time.sleep(0.05)
    assert not left()

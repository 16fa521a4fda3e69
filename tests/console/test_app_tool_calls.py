"""The tool-call page as a to-do list and the playground's first run, with AppTest
against real stores (SQLite, Milvus Lite)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest
from support.console import APP, finish_jobs, history_shown, look_up, run_page, signed_in_page


def _tool_calls_after(at: AppTest, *queries: str) -> AppTest:
    for query in queries:
        look_up(at, query)
    at.switch_page("../../pages/tool_calls.py").run()
    assert not at.exception, at.exception
    return at


def _frame(at: AppTest, column: str):
    return next(f.value for f in at.dataframe if column in f.value.columns)


def test_charts_of_calls_found_rate_and_p95(synced_sample):
    at = _tool_calls_after(run_page("playground"), "ERR_TIMEOUT", "完全不存在的内容XYZ")
    charts = at.get("vega_lite_chart")
    assert len(charts) == 3
    specs = " ".join(str(c.proto.spec) for c in charts)
    assert all(title in specs for title in ("Calls", "Found rate", "p95 latency"))
    assert "yearmonthdatehours" not in specs  # 7 days: one bar per day
    at.radio(key="period").set_value("24 hours").run()
    assert "yearmonthdatehours" in " ".join(str(c.proto.spec) for c in at.get("vega_lite_chart"))


def test_confidence_column_and_filter(synced_sample):
    at = _tool_calls_after(run_page("playground"), "ERR_TIMEOUT", "超时", "如何优化缓存")
    calls = _frame(at, "confidence")
    assert dict(zip(calls["query"], calls["confidence"], strict=True)) == {
        "ERR_TIMEOUT": "high", "超时": "low", "如何优化缓存": "none"}
    at.multiselect(key="f_confidence").set_value(["low"]).run()
    assert list(_frame(at, "confidence")["query"]) == ["超时"]
    at.multiselect(key="f_confidence").set_value(["high", "none"]).run()
    assert list(_frame(at, "confidence")["query"]) == ["如何优化缓存", "ERR_TIMEOUT"]


def test_needs_attention_groups_not_found_l1_only_and_low_confidence(synced_sample):
    at = _tool_calls_after(run_page("playground"), "ＥＲＲ＿ＮＯ＿ＳＵＣＨ＿ＣＯＤＥ", "err_no_such_code",
                           "如何优化缓存", "超时", "ERR_TIMEOUT")
    todo = _frame(at, "low confidence")
    rows = {q: (c, nf, l1, low) for q, c, nf, l1, low in
            zip(todo["query"], todo["calls"], todo["not found"], todo["L1 only"], todo["low confidence"], strict=True)}
    assert rows == {"err_no_such_code": (2, 2, 0, 0), "如何优化缓存": (1, 0, 1, 0), "超时": (1, 0, 0, 1)}
    assert todo["query"].iloc[0] == "err_no_such_code"  # most not-found first
    assert todo["open"].iloc[0] == "./?q=err_no_such_code"  # a link that opens (and shares) the lookup


def test_read_document_calls_are_listed_and_never_need_attention(synced_sample):
    from kb_core import load_settings, open_knowledge_base

    kb = open_knowledge_base(load_settings())  # an agent reads two documents on the same stores
    try:
        kb.read_document_tool("knowledge_base/domain/cache-optimization.md", caller="mcp")
        kb.read_document_tool("api/nope.md", caller="mcp")
        kb.calls.flush()
    finally:
        kb.close()
    at = _tool_calls_after(run_page("playground"), "完全不存在的内容XYZ")
    calls = _frame(at, "tool")
    assert list(zip(calls["tool"], calls["query"], calls["answer"], strict=True)) == [
        ("lookup_knowledge", "完全不存在的内容XYZ", "—"), ("read_document", "api/nope.md", "error"),
        ("read_document", "knowledge_base/domain/cache-optimization.md", "read")]
    assert list(_frame(at, "low confidence")["query"]) == ["完全不存在的内容XYZ"]  # the lookup only
    at.multiselect(key="f_tool").set_value(["read_document"]).run()
    assert list(_frame(at, "tool")["tool"]) == ["read_document", "read_document"]


def test_a_row_opens_in_the_playground_with_the_query(synced_sample):
    at = _tool_calls_after(run_page("playground"), "超时", "完全不存在的内容XYZ")
    at.selectbox(key="attention_query").set_value("超时").run()
    at.button(key="open-in-playground").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "🔎 Lookup playground"
    assert at.text_input(key="query").value == "超时"
    assert "confidence: low" in " ".join(m.value for m in at.markdown)  # the lookup ran, not just the text


def test_the_playground_runs_a_linked_query_once(synced_sample):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["q"] = "ERR_TIMEOUT"
    at.run()
    assert at.text_input(key="query").value == "ERR_TIMEOUT"
    assert "confidence: high" in " ".join(m.value for m in at.markdown)
    look_up(at, "如何优化缓存")
    assert at.query_params["q"] == "如何优化缓存"  # the URL follows the page's own lookups
    at.run()
    assert history_shown(at) == ["`如何优化缓存`", "`ERR_TIMEOUT`"]


def test_first_run_offers_to_index_and_says_the_index_is_empty(app_root, sample_root):
    at = run_page("playground")  # the sample is on disk, nothing indexed yet
    assert any(b.label == "Index 10 documents now" for b in at.button)
    look_up(at, "如何优化缓存")
    assert any(w.value.startswith("The index is empty") for w in at.warning)
    assert not [w for w in at.warning if "Nothing found" in w.value]
    assert "No chunk passed the relevance check." not in [c.value for c in at.caption]

    at.button(key="index-now").click().run()
    assert not at.exception, at.exception
    finish_jobs(at, app_root)
    assert {m.label: m.value for m in at.sidebar.metric} == {"L0": "9", "Database": "10", "Milvus": "10"}
    assert not any(b.label.startswith("Index ") for b in at.button)
    assert any(s.value.startswith("Indexed:") for s in at.success)
    look_up(at, "如何优化缓存")
    assert not [w for w in at.warning if "index is empty" in w.value]


def test_an_empty_folder_says_so(app_root):
    at = run_page("playground")
    assert any("The index is empty: there are no documents yet" in i.value for i in at.info)
    assert not at.sidebar.info


def test_a_query_needing_attention_offers_the_document_l1_finds_and_adds_itself_as_its_keyword(synced_sample):
    path = synced_sample / "knowledge_base/domain/cache-optimization.md"
    before = path.read_bytes()
    at = _tool_calls_after(run_page("playground"), "如何优化缓存")
    assert list(_frame(at, "low confidence")["query"]) == ["如何优化缓存"]
    at.selectbox(key="attention_query").set_value("如何优化缓存").run()
    assert not at.exception, at.exception
    fix = " ".join(m.value for m in at.markdown)
    assert "**L1 finds:** 缓存设计与优化指南 · `knowledge_base/domain/cache-optimization.md`" in fix
    assert "[inspect ↗](./documents?doc=domain/cache-optimization.md)" in fix
    assert next(t for t in at.text_input if t.label == "Add as a keyword").value == "如何优化缓存"
    assert next(s for s in at.selectbox if s.label == "of the document").value == \
        "knowledge_base/domain/cache-optimization.md"
    diff = next(c.value for c in at.code if c.language == "diff")
    assert "+keywords: [Redis, 缓存穿透, 缓存雪崩, cache-aside, 如何优化缓存]" in diff
    assert path.read_bytes() == before  # previewed, not written
    at.button(key="fix-save").click().run()
    assert not at.exception, at.exception
    assert any("“如何优化缓存” is now a keyword of knowledge_base/domain/cache-optimization.md" in s.value
               for s in at.success)
    assert path.read_bytes() == before.replace(b"cache-aside]", "cache-aside, 如何优化缓存]".encode())
    assert any("is a keyword of `knowledge_base/domain/cache-optimization.md` already" in i.value for i in at.info)

    at.switch_page("../../pages/playground.py").run()  # the fix works: an exact, high-confidence answer now
    look_up(at, "如何优化缓存")
    assert '"matchType": "exact_L0"' in at.code[0].value and '"confidence": "high"' in at.code[0].value


def test_the_fix_opens_the_inspector_and_a_viewer_cannot_add_keywords(synced_sample, monkeypatch):

    at = _tool_calls_after(run_page("playground"), "如何优化缓存")
    at.selectbox(key="attention_query").set_value("如何优化缓存").run()
    at.button(key="fix-inspect").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "📚 Documents" and at.query_params.get("doc") == "domain/cache-optimization.md"
    assert "缓存设计与优化指南" in [h.value for h in at.subheader]

    # sign-in with roles (as tests/console/test_signin.py): a viewer sees the fix, not the way to write it
    viewer = signed_in_page("tool_calls", monkeypatch, "vera@example.com", "viewer")
    viewer.selectbox(key="attention_query").set_value("如何优化缓存").run()
    assert not viewer.exception, viewer.exception
    assert "**L1 finds:**" in " ".join(m.value for m in viewer.markdown)
    assert any("needs the curator role" in c.value for c in viewer.caption)
    assert not [b for b in viewer.button if b.key == "fix-save"] and not viewer.code

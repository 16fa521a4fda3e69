"""The playground's retrieval test bench, with its category and language filters, with AppTest against
real stores (SQLite, Milvus Lite, no model: BM25): each control, the highlighted rows, the URL round trip, the
history's re-run, and replays from Tool calls that no longer count as needing attention."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest
from support.console import APP, history_shown, look_up, run_page
from support.documents import doc, write_doc

from pages.shell.safe import HIGHLIGHT

DNS = "knowledge_base/troubleshooting/network/dns-timeout.md"


@pytest.fixture
def nested_sample(app_root, sample_root):
    """The sample plus a document one folder deeper (troubleshooting/network), synced."""
    from kb_core import load_settings, open_knowledge_base

    write_doc(sample_root, DNS, doc("DNS 解析超时", ["DNS_TIMEOUT"], "DNS 超时",
                                    "# DNS 解析超时\n\nDNS 解析超时：先查上游 DNS 服务器，再查本机缓存。\n"))
    kb = open_knowledge_base(load_settings())
    kb.documents.reconcile()
    kb.close()
    return app_root


def _bench(at):
    return next(t for t in at.tabs if t.label.startswith("Test bench"))


def _rows(at) -> list[str]:
    """Each bench row's header: rank, source, heading, language badge, scores."""
    return [m.value for m in _bench(at).markdown if re.match(r"\*\*\d+\.\*\*", m.value)]


def _chunks(at) -> list[str]:
    """Each bench row's chunk, as the page hands it to Markdown (escaped, highlighted)."""
    return [m.value for m in _bench(at).markdown if not re.match(r"\*\*\d+\.\*\*", m.value)]


def _sources(at) -> set[str]:
    return {re.search(r"`([^`]+)`", row).group(1) for row in _rows(at)}


def _scores(at, name: str) -> list[float]:
    return [float(re.search(re.escape(name) + r" \*\*([0-9.e+-]+)\*\*", row).group(1)) for row in _rows(at)]


def _choose(at, *, retriever: str | None = None, top_k: int | None = None, categories=None, languages=None,
            min_score=None):
    if retriever is not None:
        at.selectbox(key="trial_retriever").set_value(retriever).run()
    if top_k is not None:
        at.slider(key="trial_top_k").set_value(top_k)
    if categories is not None:
        at.multiselect(key="trial_categories").set_value(categories)
    if languages is not None:
        at.multiselect(key="trial_languages").set_value(languages)
    if min_score is not None:
        at.number_input(key="trial_min_score").set_value(min_score)
    return at


def test_the_agents_view_is_the_default_and_the_bench_sits_beside_it(synced_sample):
    at = run_page("playground")
    retriever = at.selectbox(key="trial_retriever")
    assert retriever.value == "agent" and retriever.options == [
        "As agents get it", "L1 hybrid (BM25 + dense)", "BM25 only"]  # no model: no dense only
    for control in (at.slider(key="trial_top_k"), at.multiselect(key="trial_categories"),
                    at.multiselect(key="trial_languages"), at.number_input(key="trial_min_score")):
        assert control.disabled  # they need an L1 retriever
    look_up(at, "超时")
    assert [t.label for t in at.tabs] == ["What the agent receives", "Test bench · As agents get it · 3 rows"]
    assert at.tabs[0].caption[0].value.startswith("The exact tool output")
    assert '"confidence": "low"' in at.tabs[0].code[0].value  # the raw JSON is in the agent's tab
    assert len(_rows(at)) == 3 and all("fused score" in row for row in _rows(at))
    assert "The L1 rows the agents' lookup used" in _bench(at).caption[0].value


def test_retriever_and_top_k(synced_sample):
    at = look_up(run_page("playground"), "超时")
    agents_json = at.code[0].value
    _choose(at, retriever="bm25", top_k=10)
    assert not at.slider(key="trial_top_k").disabled
    look_up(at, "超时")
    assert at.code[0].value == agents_json  # the agent's answer does not move
    assert _bench(at).label.startswith("Test bench · BM25 only · top 10 · ")
    assert 3 < len(_rows(at)) <= 10
    scores = _scores(at, "BM25 score")
    assert scores == sorted(scores, reverse=True)
    assert all("found by bm25 (bm25 " in row for row in _rows(at))  # each retriever's own score
    assert at.query_params == {"q": "超时", "retriever": "bm25", "k": "10"}  # a link to this test
    _choose(at, retriever="hybrid", top_k=1)
    look_up(at, "超时")
    assert len(_rows(at)) == 1 and "fused score" in _rows(at)[0]


def test_a_category_filter_takes_the_folder_and_its_sub_folders(nested_sample):
    at = run_page("playground")
    _choose(at, retriever="bm25")
    assert at.multiselect(key="trial_categories").options == [
        "api", "domain", "troubleshooting", "troubleshooting/network"]
    _choose(at, top_k=20, categories=["troubleshooting"])
    look_up(at, "超时")
    assert DNS in _sources(at) and "knowledge_base/troubleshooting/timeout.md" in _sources(at)
    assert all(source.startswith("knowledge_base/troubleshooting/") for source in _sources(at))
    _choose(at, categories=["troubleshooting/network"])
    look_up(at, "超时")
    assert _sources(at) == {DNS}
    assert "in troubleshooting/network" in _bench(at).label


def test_a_language_filter(synced_sample):
    at = _choose(run_page("playground"), retriever="hybrid", top_k=20)
    assert at.multiselect(key="trial_languages").options == ["en", "zh"]
    look_up(at, "timeout")
    assert {re.search(r":gray-badge\[(\w+)\]", row).group(1) for row in _rows(at)} == {"zh"}
    _choose(at, languages=["en"])
    look_up(at, "timeout")
    assert _rows(at) == [] and "0 of at most 20 rows in 4 documents" in _bench(at).caption[0].value
    _choose(at, languages=["zh"])
    look_up(at, "timeout")
    assert _rows(at) and all(":gray-badge[zh]" in row for row in _rows(at))


def test_a_minimum_score(synced_sample):
    at = look_up(_choose(run_page("playground"), retriever="bm25", top_k=20), "超时")
    every = _scores(at, "BM25 score")
    _choose(at, min_score=2.0)
    look_up(at, "超时")
    kept = _scores(at, "BM25 score")
    assert kept == [s for s in every if s >= 2.0] and 0 < len(kept) < len(every)
    assert "BM25 score ≥ 2" in _bench(at).label


def test_the_querys_terms_are_highlighted_in_the_rows(synced_sample):
    at = look_up(_choose(run_page("playground"), retriever="bm25", top_k=5), "支付网关超时怎么办")
    chunks = _chunks(at)
    assert chunks and all(HIGHLIGHT + "超时]" in chunk or HIGHLIGHT + "支付网关]" in chunk for chunk in chunks)
    assert not any(HIGHLIGHT + "怎么办]" in chunk for chunk in chunks)  # filler is no term


def test_a_test_is_a_link_and_the_link_runs_that_test(synced_sample):
    link = {"q": "超时", "retriever": "bm25", "k": "5", "category": ["troubleshooting", "api"], "lang": "zh",
            "min_score": "1.5"}
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(link)
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="query").value == "超时"
    assert at.selectbox(key="trial_retriever").value == "bm25"
    assert at.slider(key="trial_top_k").value == 5
    assert at.multiselect(key="trial_categories").value == ["api", "troubleshooting"]
    assert at.multiselect(key="trial_languages").value == ["zh"]
    assert at.number_input(key="trial_min_score").value == 1.5
    label = "Test bench · BM25 only · top 5 · in api, troubleshooting · lang zh · BM25 score ≥ 1.5 · "
    assert _bench(at).label.startswith(label) and _rows(at)
    assert history_shown(at) == ["`超时`"]
    # the page's own run keeps the URL in step: change a control, run, and the link says so
    _choose(at, top_k=8)
    look_up(at, "超时")
    shared = dict(at.query_params)
    assert shared == {"q": "超时", "retriever": "bm25", "k": "8", "category": ["api", "troubleshooting"],
                      "lang": "zh", "min_score": "1.5"}
    # a colleague opens it: the same test
    other = AppTest.from_file(APP, default_timeout=60)
    other.query_params.update(shared)
    other.run()
    assert _bench(other).label.startswith(label.replace("top 5", "top 8"))
    assert _rows(other) == _rows(at)
    other.switch_page("../../pages/tool_calls.py").run()
    calls = next(f.value for f in other.dataframe if "caller" in f.value.columns)
    assert list(calls["caller"]) == ["console-replay", "console", "console-replay"]  # links are replays


def test_a_bad_link_says_why_and_runs_nothing(synced_sample):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"q": "超时", "retriever": "bm25", "k": "99"})
    at.run()
    assert not at.exception, at.exception
    assert any("This link's test cannot run: top-k must be a whole number from 1 to 20" in e.value for e in at.error)
    assert not at.tabs and history_shown(at) == []


def test_a_dense_link_without_a_model_is_refused_by_kb_core(synced_sample):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"q": "超时", "retriever": "dense"})
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="trial_retriever").value == "dense"  # kept visible: the link asked for it
    assert any("dense only needs the embedding model" in e.value for e in at.error)
    _choose(at, retriever="bm25")
    look_up(at, "超时")
    assert _rows(at) and not any("dense only" in e.value for e in at.error)


def test_the_history_runs_a_test_again_with_its_settings(synced_sample):
    at = look_up(_choose(run_page("playground"), retriever="bm25", top_k=10), "超时")
    _choose(at, retriever="agent")
    look_up(at, "ERR_TIMEOUT")
    assert history_shown(at) == ["`ERR_TIMEOUT`", "`超时`"]
    history = next(e for e in at.expander if e.label.startswith("History"))
    assert "BM25 only · top 10" in " ".join(c.value for c in history.caption)
    at.button(key="again-1").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="trial_retriever").value == "bm25" and at.slider(key="trial_top_k").value == 10
    assert _bench(at).label.startswith("Test bench · BM25 only · top 10 · ")
    assert history_shown(at)[:2] == ["`超时`", "`ERR_TIMEOUT`"]
    at.switch_page("../../pages/tool_calls.py").run()
    calls = next(f.value for f in at.dataframe if "caller" in f.value.columns)
    assert list(calls["caller"]) == ["console-replay", "console", "console"]


def test_opening_a_query_from_tool_calls_does_not_count_it_again(synced_sample):
    at = look_up(run_page("playground"), "超时")
    look_up(at, "完全不存在的内容XYZ")
    at.switch_page("../../pages/tool_calls.py").run()
    todo = next(f.value for f in at.dataframe if "low confidence" in f.value.columns)
    before = dict(zip(todo["query"], todo["calls"], strict=True))
    assert before == {"完全不存在的内容XYZ": 1, "超时": 1}
    at.selectbox(key="attention_query").set_value("超时").run()
    at.button(key="open-in-playground").click().run()
    assert "confidence: low" in " ".join(m.value for m in at.markdown)  # it ran
    at.switch_page("../../pages/tool_calls.py").run()
    todo = next(f.value for f in at.dataframe if "low confidence" in f.value.columns)
    assert dict(zip(todo["query"], todo["calls"], strict=True)) == before
    calls = next(f.value for f in at.dataframe if "caller" in f.value.columns)
    assert list(zip(calls["query"], calls["caller"], strict=True))[0] == ("超时", "console-replay")

"""The spec's lookup: when L1 is called, and the exact JSON an agent receives. L1 is a recording fake here;
the real Milvus searcher is exercised by the storage tests."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from support.fakes import RecordingL1

from kb_core import HybridLookup, KnowledgeIndex, L1Hit

PAYMENT = "knowledge_base/api/payment-errors.md"
TIMEOUT = "knowledge_base/troubleshooting/timeout.md"
CACHE = "knowledge_base/domain/cache-optimization.md"


@pytest.fixture
def index(sample_root) -> KnowledgeIndex:
    idx = KnowledgeIndex("knowledge_base/", app_root=sample_root)
    idx.load()
    return idx


def hit(source: str, content: str = "chunk", score: float = 0.9) -> L1Hit:
    return L1Hit(content=content, source=source, score=score, retrievers=("bm25",))


# -- when L1 is called ----------------------------------------------------------------------------------
def test_req_4_1_1_unique_match_is_high_confidence_and_l1_is_not_called(index):
    l1 = RecordingL1([hit(CACHE)])
    result = HybridLookup(index, l1).lookup("ERR_TIMEOUT")
    assert l1.calls == []
    assert result.primary.confidence == "high"
    assert result.trace.l1_called is False


def test_req_4_1_2_several_matches_are_low_confidence_and_l1_is_called_once(index):
    l1 = RecordingL1([hit(TIMEOUT)])
    result = HybridLookup(index, l1).lookup("超时")
    assert l1.calls == [("超时", 3, None)]
    assert result.primary.confidence == "low"


def test_req_4_1_2_three_matches(index):
    l1 = RecordingL1([hit(CACHE)])
    # "超时" matches two sample documents, "Redis" a third
    result = HybridLookup(index, l1).lookup("超时 Redis")
    assert len(result.trace.l0_matches) == 3
    assert l1.calls == [("超时 Redis", 3, None)]
    assert result.primary.confidence == "low"


def test_req_4_1_3_no_match_calls_l1_with_top_k_3_and_no_category(index):
    l1 = RecordingL1([hit(CACHE)])
    result = HybridLookup(index, l1).lookup("如何优化缓存")
    assert l1.calls == [("如何优化缓存", 3, None)]
    assert result.primary is None


# -- the answer an agent receives -----------------------------------------------------------------------
def test_req_5_1_unique_match_returns_l0_only(index, sample_root):
    result = HybridLookup(index, RecordingL1([hit(CACHE)])).lookup("ERR_TIMEOUT")
    text = (sample_root / PAYMENT).read_text(encoding="utf-8")
    expected_content = text if len(text) <= 2000 else text[:2000] + "..."
    # when the page last changed: the sample's frontmatter has no `updated`, so the file's time
    modified = datetime.fromtimestamp((sample_root / PAYMENT).stat().st_mtime, UTC)
    assert result.to_dict() == {
        "found": True,
        "primary": {
            "content": expected_content,
            "source": PAYMENT,
            "matchType": "exact_L0",
            "confidence": "high",
            # the frontmatter's `sections` names, not the headings, when the document has them
            "availableSections": ["超时排查"],
            "section": None,
            "updated": modified.isoformat(timespec="seconds").replace("+00:00", "Z"),
        },
        "supplement": None,
    }


def test_req_5_1_content_is_cut_at_2000_characters(index, sample_root):
    path = sample_root / PAYMENT
    path.write_text(path.read_text(encoding="utf-8") + "长" * 3000, encoding="utf-8")
    content = HybridLookup(index, RecordingL1()).lookup("ERR_TIMEOUT").primary.content
    assert len(content) == 2003 and content.endswith("...")


def test_req_5_2_several_matches_return_first_l0_and_l1_supplement(sample_root):
    """The spec's several-hits answer as written (KB_L0_MATCHING=substring): the first L0 match in index
    order is the primary."""
    index = KnowledgeIndex("knowledge_base/", app_root=sample_root, matching="substring")
    index.load()
    l1 = RecordingL1([hit(TIMEOUT, "timeout chunk", 0.95), hit(PAYMENT, "same doc chunk", 0.9)])
    result = HybridLookup(index, l1).lookup("超时")
    data = result.to_dict()
    assert data["found"] is True
    assert data["primary"]["source"] == PAYMENT
    assert data["primary"]["matchType"] == "exact_L0"
    assert data["primary"]["confidence"] == "low"
    assert data["primary"]["availableSections"] == ["超时排查"]  # its frontmatter `sections`
    # the best hit from a *different* document than primary
    assert data["supplement"] == {"content": "timeout chunk", "source": TIMEOUT, "matchType": "semantic_L1",
                                  "retrievers": ["bm25"]}


def test_req_5_2_ranked_first_l0_match_is_the_primary(index):
    """The default rule ranks the hits: `超时`, equal to the query, outranks `接口超时` (which only contains it),
    so the two pages claiming `超时` tie and L1's order makes the troubleshooting page the primary; the
    supplement comes from another one."""
    l1 = RecordingL1([hit(TIMEOUT, "same doc chunk", 0.95), hit(PAYMENT, "payment chunk", 0.9)])
    result = HybridLookup(index, l1).lookup("超时")
    data = result.to_dict()
    assert data["primary"]["source"] == TIMEOUT and data["primary"]["confidence"] == "low"
    assert data["supplement"] == {"content": "payment chunk", "source": PAYMENT, "matchType": "semantic_L1",
                                  "retrievers": ["bm25"]}
    assert result.trace.primary_reason == "tied with 1 other document(s) on “超时” (claimed by 2); L1 ranks it highest"


def test_when_l1_finds_only_the_primary_page_the_supplement_is_a_passage_the_primary_does_not_show(
        index, sample_root):
    text = (sample_root / TIMEOUT).read_text(encoding="utf-8")
    shown = next(line for line in text.splitlines() if len(line) > 30 and not line.startswith(("#", "-", "title")))
    beyond = "## 附录\n\n这一段在文档的两千字之后，主答案的内容里看不到它，所以补充它才有用。"
    l1 = RecordingL1([hit(TIMEOUT, f"## 标题\n\n{shown}"), hit(TIMEOUT, beyond)])
    result = HybridLookup(index, l1).lookup("超时")
    assert result.primary.source == TIMEOUT
    assert result.supplement.content == beyond and result.supplement.source == TIMEOUT
    # every passage L1 found is already in the primary: no supplement (it would repeat the answer)
    result = HybridLookup(index, RecordingL1([hit(TIMEOUT, shown)])).lookup("超时")
    assert result.primary.source == TIMEOUT and result.supplement is None and result.found


def test_req_5_3_no_l0_match_returns_l1_only(index):
    l1 = RecordingL1([hit(CACHE, "缓存优化片段"), hit(TIMEOUT, "x")])
    result = HybridLookup(index, l1).lookup("如何优化性能")
    data = result.to_dict()
    assert data == {
        "found": True,
        "primary": None,
        "supplement": {"content": "缓存优化片段", "source": CACHE, "matchType": "semantic_L1", "retrievers": ["bm25"]},
        # an answer led by L1 is unsure: L1's other pages are named for the agent to read
        "alternatives": [{"source": TIMEOUT, "title": data["alternatives"][0]["title"], "lang": "zh",
                          "why": "L1 rank 2 (bm25, score 0.9)"}],
    }
    assert data["alternatives"][0]["title"]


def test_req_5_4_nothing_found_anywhere(index):
    l1 = RecordingL1([])
    result = HybridLookup(index, l1).lookup("完全不存在的内容XYZ")
    assert result.to_dict() == {"found": False, "primary": None, "supplement": None}
    assert len(l1.calls) == 1


# -- failure and trace -------------------------------------------------------------------------------------
def test_l1_failure_returns_what_l0_found_and_logs_error_with_request_id(index, caplog):
    l1 = RecordingL1(error=RuntimeError("milvus down"))
    with caplog.at_level(logging.ERROR):
        result = HybridLookup(index, l1).lookup("超时")
    assert result.found is True
    # without L1 the tie on `超时` goes to index order: the spec's own example of several hits
    assert result.primary.source == PAYMENT and result.supplement is None
    assert "milvus down" in result.trace.l1_error
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(result.trace.request_id in m and "milvus down" in m for m in errors)


def test_l1_failure_with_no_l0_match_is_not_found(index):
    result = HybridLookup(index, RecordingL1(error=TimeoutError("slow"))).lookup("如何优化缓存")
    assert result.to_dict() == {"found": False, "primary": None, "supplement": None}


def test_trace_explains_the_decision(index):
    l1 = RecordingL1([hit(TIMEOUT, "t", 0.5)])
    result = HybridLookup(index, l1).lookup("支付网关超时问题")
    trace = result.trace
    assert len(trace.request_id) == 8
    assert [(m.entry.file_path, set(m.keywords)) for m in trace.l0_matches] == [
        (PAYMENT, {"支付网关", "超时"}), (TIMEOUT, {"超时"})]
    assert trace.l1_called and "several" in trace.l1_reason
    assert trace.l1_hits[0].score == 0.5
    assert {"l0", "l1", "total"} <= set(trace.timings_ms)
    assert "trace" not in result.to_dict()
    assert trace.to_dict()["l0Matches"][0]["source"] == PAYMENT


def test_one_info_line_per_lookup_with_request_id(index, caplog):
    with caplog.at_level(logging.INFO, logger="kb_core.retrieval.lookup"):
        result = HybridLookup(index, RecordingL1()).lookup("ERR_TIMEOUT")
    infos = [r.getMessage() for r in caplog.records
             if r.levelno == logging.INFO and r.name == "kb_core.retrieval.lookup"]
    assert len(infos) == 1 and result.trace.request_id in infos[0]


def test_blank_query_finds_nothing_and_skips_l1(index):
    l1 = RecordingL1([hit(CACHE)])
    result = HybridLookup(index, l1).lookup("   ")
    assert result.found is False and l1.calls == []


def test_deleted_file_is_not_served_as_primary(index, sample_root):
    (sample_root / PAYMENT).unlink()
    l1 = RecordingL1([hit(CACHE)])
    result = HybridLookup(index, l1).lookup("ERR_TIMEOUT")
    assert result.primary is None
    assert result.trace.stale_sources == (PAYMENT,)
    assert result.supplement.source == CACHE  # no live L0 hit left, so L1 answered


def test_a_frontmatter_section_name_serves_its_heading(index):
    result = HybridLookup(index, RecordingL1()).lookup("ERR_TIMEOUT", section_title="超时排查")
    assert result.primary.available_sections == ("超时排查",)
    assert result.primary.section == "1. 超时类错误"
    assert result.primary.content.startswith("## 1. 超时类错误\n")
    assert "## 2." not in result.primary.content
    assert result.trace.section_title == "超时排查"


def test_a_tie_among_thousands_is_broken_by_l1_without_building_every_tied_match(tmp_path):
    folder = tmp_path / "knowledge_base/x"
    folder.mkdir(parents=True)
    for i in range(3000):
        (folder / f"d{i}.md").write_text(f"---\ntitle: d{i}\nkeywords: [Apache Lumen]\n---\nbody {i}\n")
    # the keyword counts as specific here (a tie among specific keywords keeps an L0 primary, as the spec answers)
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path, generic_docs=5000)
    index.load()
    chosen = "knowledge_base/x/d2500.md"
    assert index.match("Apache Lumen").tied_index(chosen) is not None
    result = HybridLookup(index, RecordingL1([hit("knowledge_base/x/elsewhere.md"), hit(chosen)])).lookup(
        "Apache Lumen")
    assert result.primary.source == chosen
    assert result.trace.primary_reason.startswith("tied with 2999 other document(s) on “Apache Lumen”")
    assert result.trace.l0_count == 3000 and len(result.trace.l0_matches) == 20

"""`read_document`, the agents' second tool: any indexed document served exactly as a lookup serves
its primary, a section of it, error results for anything else, the call log, and the response model."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta

import pytest
from pydantic import ValidationError
from support.documents import doc, write_doc
from support.fakes import RecordingL1
from support.paths import TESTS

from kb_core import (
    READ_TOOL_NAME,
    TOOL_DESCRIPTION,
    HybridLookup,
    KnowledgeIndex,
    openai_tool_schema,
    openai_tool_schemas,
)
from kb_core.agent.response import LookupResponse, ReadDocumentResponse
from kb_core.console import openai_read_tool_schema
from kb_core.errors import UnknownSourceError
from kb_core.retrieval.reading import DocumentReader

PAYMENT = "knowledge_base/api/payment-errors.md"
CACHE = "knowledge_base/domain/cache-optimization.md"
SECTIONS_KB = TESTS / "fixtures" / "sections_kb"
REFERENCE = "knowledge_base/gateway/limit-req-reference.md"


@pytest.fixture
def sample_kb(open_kb, sample_root):
    kb = open_kb(sample_root)
    kb.documents.reconcile()
    return kb


def _error_result(response) -> None:
    assert response.error is not None and response.result is None
    assert response.payload == {"found": False, "primary": None, "supplement": None, "error": response.error}


# -- served like a primary ---------------------------------------------------------------------------------------
def test_a_supplements_document_is_served_as_a_lookup_serves_its_primary(sample_kb):
    supplement = sample_kb.lookup_knowledge("如何优化缓存")["supplement"]
    assert supplement["source"] == CACHE  # L1 gave one passage of it
    read = sample_kb.read_document_tool(supplement["source"])
    as_primary = sample_kb.lookup_knowledge("cache-aside")  # the same document as a unique L0 hit
    assert as_primary["primary"]["source"] == CACHE and as_primary["primary"]["confidence"] == "high"
    assert set(read) == {"found", "primary", "supplement"}  # no note without a section_title
    assert read["found"] is True and read["supplement"] is None
    assert read["primary"] == {**as_primary["primary"], "matchType": "read"}
    assert read["primary"]["content"].startswith("---\ntitle: 缓存设计与优化指南")


@pytest.fixture
def sections_index(tmp_path) -> KnowledgeIndex:
    shutil.copytree(SECTIONS_KB, tmp_path / "knowledge_base")
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    return index


def test_a_long_document_is_cut_at_2000_characters_like_a_primary(sections_index):
    read = DocumentReader(sections_index).read(REFERENCE)
    primary = HybridLookup(sections_index, RecordingL1()).lookup("limit-req").primary
    assert primary.source == REFERENCE
    assert len(read.primary.content) == 2003 and read.primary.content.endswith("...")
    assert read.primary.content == primary.content
    assert read.primary.available_sections == primary.available_sections and read.primary.section is None
    assert read.primary.match_type == "read" and read.primary.confidence == "high" and read.note is None


@pytest.mark.parametrize("title", ["Attributes", "redis-cluster",
                                   "Troubleshooting > Requests are slow but not rejected", "redis", "Pricing"])
def test_a_section_is_served_as_the_lookup_serves_it(sections_index, title):
    """The same section text, heading path and note as `lookup(..., section_title)`: one implementation."""
    read = DocumentReader(sections_index).read(REFERENCE, title)
    looked_up = HybridLookup(sections_index, RecordingL1()).lookup("limit-req", title)
    assert (read.primary.content, read.primary.section, read.note) == (
        looked_up.primary.content, looked_up.primary.section, looked_up.note)
    if title in ("redis", "Pricing"):  # ambiguous, unknown: the head and a note
        assert read.primary.section is None and read.note and read.to_dict()["note"] == read.note
    else:
        assert read.primary.section and read.note is None and "note" not in read.to_dict()


def test_section_title_through_the_tool(sample_kb):
    served = sample_kb.read_document_tool(PAYMENT, "超时排查")
    assert served["primary"]["section"] == "1. 超时类错误" and "note" not in served
    assert served["primary"]["content"].startswith("## 1. 超时类错误\n") and "## 2." not in served["primary"]["content"]
    missed = sample_kb.read_document_tool(PAYMENT, "退款")
    assert missed["primary"]["section"] is None and missed["note"] == "no section '退款'; available: 超时排查"
    assert missed["primary"]["content"].startswith("---\ntitle: 支付网关错误码定义")
    blank = sample_kb.read_document_tool(PAYMENT, "  ")
    assert blank["primary"]["section"] is None and "note" not in blank


def test_translations_are_listed_and_the_version_asked_for_is_served(open_kb, tmp_path):
    en, zh = (f"knowledge_base/docs/{lang}/plugins/limit-req.md" for lang in ("en", "zh"))
    write_doc(tmp_path, en, doc("limit-req", ["limit-req"], "Limit the request rate", "# limit-req\n\nrate.\n"))
    write_doc(tmp_path, zh, doc("limit-req", ["limit-req", "插件"], "限制请求速率", "# limit-req\n\n速率。\n"))
    kb = open_kb(tmp_path)
    read = kb.read_document_tool(zh)
    assert read["primary"]["source"] == zh and read["primary"]["translations"] == [{"source": en, "lang": "en"}]
    assert "速率" in read["primary"]["content"]


# -- which sources are accepted ------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["domain/cache-optimization.md", "./domain/cache-optimization.md",
                                    f"  {CACHE}  ", "absolute"])
def test_the_path_below_the_knowledge_base_and_the_absolute_path_are_accepted(sample_kb, sample_root, source):
    if source == "absolute":
        source = str(sample_root / CACHE)
    read = sample_kb.read_document_tool(source)
    assert read["found"] and read["primary"]["source"] == CACHE  # always the source as answers give it


@pytest.mark.parametrize("source", [
    "knowledge_base/api/no-such.md", "../../etc/passwd", "knowledge_base/../../etc/passwd", "/etc/passwd",
    "api/../../../etc/passwd", "knowledge_base/api", "api/order-api.md",  # on disk, but no frontmatter: not indexed
    "README.md", "knowledge_base/api/payment-errors.md\x00.txt",
], ids=["unknown", "escape", "display-escape", "absolute-outside", "relative-escape", "folder", "not-indexed",
        "outside-base", "nul"])
def test_a_source_outside_the_index_is_an_error_result(sample_kb, sample_root, source):
    assert (sample_root / "knowledge_base/api/order-api.md").is_file()
    response = sample_kb.call_tool({"source": source}, tool=READ_TOOL_NAME)
    _error_result(response)
    assert "no indexed document" in response.error


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({}, "missing required argument 'source'"), ({"source": ""}, "must not be empty"),
     ({"source": "  "}, "must not be empty"), ({"source": 5}, "'source' must be a string"),
     ({"source": None}, "missing required argument 'source'"), ({"source": ["api/x.md"]}, "must be a string"),
     ({"source": "x" * 1001}, "at most 1000"), ({"source": PAYMENT, "section_title": 3}, "section_title"),
     ({"source": PAYMENT, "query": "ERR_TIMEOUT"}, "unknown argument(s): query"), (PAYMENT, "must be an object")],
    ids=["missing", "empty", "blank", "int", "null", "list", "too-long", "bad-section", "unknown-argument",
         "not-a-dict"],
)
def test_bad_arguments_give_a_readable_error_result(sample_kb, arguments, message):
    response = sample_kb.call_tool(arguments, tool=READ_TOOL_NAME)
    _error_result(response)
    assert response.error.startswith("invalid arguments: ") and message in response.error


def test_an_indexed_document_whose_file_is_gone_is_an_error_result(sample_kb, sample_root):
    (sample_root / PAYMENT).unlink()
    response = sample_kb.call_tool({"source": PAYMENT}, tool=READ_TOOL_NAME)
    _error_result(response)
    assert PAYMENT in response.error


def test_the_reader_raises_for_the_tool_to_report(sections_index):
    with pytest.raises(UnknownSourceError, match="no indexed document"):
        DocumentReader(sections_index).read("knowledge_base/gateway/nope.md")
    assert DocumentReader(sections_index).entry(42) is None


def test_an_unknown_tool_name_is_an_error_result(sample_kb):
    response = sample_kb.call_tool({"query": "ERR_TIMEOUT"}, tool="search_everything")
    _error_result(response)
    assert "unknown tool 'search_everything'" in response.error and "read_document" in response.error


# -- the call log --------------------------------------------------------------------------------------------------
def test_reads_are_logged_with_their_tool_name_and_never_need_attention(sample_kb):
    sample_kb.lookup_knowledge("完全不存在的内容XYZ")  # a lookup that found nothing
    sample_kb.read_document_tool("api/payment-errors.md", "超时排查", caller="mcp")
    sample_kb.read_document_tool(CACHE)
    sample_kb.call_tool({"source": "nope.md"}, tool=READ_TOOL_NAME)
    sample_kb.calls.flush()
    refused, plain, section, lookup = sample_kb.calls.recent()[:4]
    assert [c.tool_name for c in (refused, plain, section, lookup)] == [
        "read_document", "read_document", "read_document", "lookup_knowledge"]
    assert section.arguments == {"source": "api/payment-errors.md", "section_title": "超时排查",
                                 "_section": "1. 超时类错误"}
    assert section.caller == "mcp" and section.sources == (PAYMENT,) and section.match_types == ("read",)
    assert section.found and section.confidence == "high" and section.error is None and len(section.request_id) == 8
    assert plain.arguments == {"source": CACHE, "section_title": None} and plain.sources == (CACHE,)
    # a refused call has a request id too: its log line (the error) carries it
    assert not refused.found and "no indexed document" in refused.error and len(refused.request_id) == 8
    groups = sample_kb.calls.needing_attention(timedelta(days=1))
    assert [g.query for g in groups] == ["完全不存在的内容XYZ"]  # reads are not misses
    (bucket,) = sample_kb.calls.buckets(timedelta(days=1))
    assert bucket.calls == 4 and bucket.lookups == 1 and bucket.errors == 1
    assert bucket.found_rate == 0.0  # of lookups: the reads found their documents, but they were not searches


# -- schemas and the response model ------------------------------------------------------------------------------
def test_both_tools_as_function_calling_schemas():
    lookup, read = openai_tool_schemas()
    assert lookup == openai_tool_schema() and read == openai_read_tool_schema()
    assert read["function"]["name"] == READ_TOOL_NAME == "read_document"
    params = read["function"]["parameters"]
    assert params["required"] == ["source"] and params["additionalProperties"] is False
    assert set(params["properties"]) == {"source", "section_title", "language"}  # with the language filter
    assert "availableSections" in params["properties"]["section_title"]["description"]
    description = read["function"]["description"]
    assert "supplement" in description and "alternatives" in description and "'read'" in description
    # lookup_knowledge tells the agent when to read a document instead of searching again
    assert "read_document" in TOOL_DESCRIPTION and "supplement.source" in TOOL_DESCRIPTION
    json.dumps(openai_tool_schemas())


def test_every_answer_validates_against_the_response_model(sample_kb):
    answers = [sample_kb.lookup_knowledge(q) for q in ("ERR_TIMEOUT", "超时", "如何优化缓存", "完全不存在的内容XYZ")]
    answers += [sample_kb.lookup_knowledge("ERR_TIMEOUT", "退款"), sample_kb.lookup_knowledge("")]
    for answer in answers:
        assert LookupResponse.model_validate(answer).model_dump(exclude_unset=True) == answer
    reads = [sample_kb.read_document_tool(PAYMENT, "退款"), sample_kb.read_document_tool("nope.md")]
    for read in reads:
        assert ReadDocumentResponse.model_validate(read).model_dump(exclude_unset=True) == read


def test_the_response_model_takes_the_optional_fields_and_refuses_a_wrong_shape():
    grown = {
        "found": True,
        "primary": {"content": "x", "source": "a.md", "matchType": "exact_L0", "confidence": "low",
                    "availableSections": None, "section": None, "translations": [{"source": "b.md", "lang": "en"}]},
        "supplement": {"content": "y", "source": "c.md", "matchType": "semantic_L1", "retrievers": ["dense", "bm25"]},
        "alternatives": [{"source": "d.md", "title": "D", "lang": "zh", "why": "also claims 'API'"}],
        "suggestions": [{"keyword": "ERR_TIMEOUT", "source": "a.md", "title": "A"}],
        "note": "no section 'x'", "somethingNew": {"kept": True},
    }
    assert LookupResponse.model_validate(grown).model_dump(exclude_unset=True) == grown
    for broken in ({k: v for k, v in grown.items() if k != "found"},
                   {**grown, "primary": {"content": "x"}},
                   {**grown, "alternatives": [{"title": "no source"}]},
                   {**grown, "supplement": {**grown["supplement"], "retrievers": "dense"}}):
        with pytest.raises(ValidationError):
            LookupResponse.model_validate(broken)

"""The keyword map predicts what L0 does: every prediction is checked against a real lookup of the keyword."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.documents import doc, write_doc
from support.paths import FIXTURES

from kb_core.keywords.index import KnowledgeIndex
from kb_core.keywords.map import keyword_hits, keyword_map


def _index(root: Path, matching: str = "words", generic_docs: int | None = 2) -> KnowledgeIndex:
    write_doc(root, "knowledge_base/gateway/intro.md", doc("Apache APISIX", ["Apache APISIX", "API Gateway", "Plugin"]))
    write_doc(root, "knowledge_base/gateway/routes.md", doc("Routes", ["APISIX", "route", "Plugin"]))
    write_doc(root, "knowledge_base/gateway/limit.md", doc("limit-req", ["limit-req", "Plugin", "如何", "e", "2.0"]))
    # another page claiming limit-req (not a translation of gateway/limit.md: another file name)
    write_doc(root, "knowledge_base/gateway-zh/limit-zh.md", doc("limit-req 限流", ["limit-req", "限流", "插件"]))
    write_doc(root, "knowledge_base/gateway/admin.md", doc("Admin API", ["Admin API", "API"]))
    # five pages: with the default limit (more than 5 claimants) nothing here would be generic
    index = KnowledgeIndex("knowledge_base", app_root=root, matching=matching, generic_docs=generic_docs)
    index.load()
    return index


def test_an_overlap_is_ambiguous_for_the_shorter_keyword_and_harmless_for_the_longer(tmp_path):
    index = _index(tmp_path)
    rows = {r.keyword: r for r in keyword_map(index.snapshot)}
    apisix, apache = rows["APISIX"], rows["Apache APISIX"]
    assert apisix.kind == "overlap" and apisix.hits == 2 and apisix.overlaps == ("Apache APISIX",)
    assert apache.kind == "shadows" and not apache.problem and apache.shadows == ("APISIX",)
    assert len(index.match("APISIX")) == 2 and len(index.match("Apache APISIX")) == 1  # what L0 really does
    # `API` is inside `API Gateway` of another document, and inside `Admin API` of its own (that one adds nothing)
    assert rows["API"].overlaps == ("API Gateway",) and rows["API"].hits == 2


def test_clashes_generic_and_weak_keywords(tmp_path):
    summary = keyword_map(_index(tmp_path).snapshot)
    rows = {r.keyword: r for r in summary}
    assert rows["Plugin"].kind == "generic" and len(rows["Plugin"].file_paths) == 3
    assert summary.generic_limit == 2
    default = {r.keyword: r for r in keyword_map(_index(tmp_path, generic_docs=None).snapshot)}
    assert default["Plugin"].kind == "clash" and default["Plugin"].generic_limit == 5  # max(5, 1 % of 5 pages)
    assert rows["limit-req"].kind == "clash" and rows["limit-req"].hits == 2
    assert {r.keyword: r.weak for r in summary.weak} == {
        "如何": "a stop word", "e": "shorter than 2 characters", "2.0": "only digits or punctuation"}
    assert rows["route"].kind == "ok" and not rows["route"].problem
    assert [r.keyword for r in summary.rows[:3]] == ["Plugin", "limit-req", "API"]  # generic, clash, overlap
    assert "claimed by 2 documents" in rows["limit-req"].explain()
    assert "gets 2 hits (confidence low)" in rows["APISIX"].explain()


def test_every_prediction_is_what_l0_returns_on_realistic_documents(tmp_path):
    shutil.copytree(FIXTURES / "realistic_kb", tmp_path / "knowledge_base")
    for matching in ("words", "substring"):
        index = KnowledgeIndex("knowledge_base", app_root=tmp_path, matching=matching)
        index.load()
        summary = keyword_map(index.snapshot)
        for row in summary:
            if row.weak is None:
                hits = index.match(row.keyword)
                assert row.hits == hits.group_count(), (matching, row.keyword)  # translations count once
                assert row.ambiguous == (hits.group_count() > 1)
                assert {h.file_path for h in keyword_hits(index.snapshot, row.keyword)} == \
                    {m.entry.file_path for m in hits}
        assert summary.overlaps, matching  # the fixture has them (`API` in `API Gateway`, `JWT` in `jwt-auth`)


def test_the_substring_rule_makes_both_directions_ambiguous(tmp_path):
    rows = {r.keyword: r for r in keyword_map(_index(tmp_path, matching="substring").snapshot)}
    assert rows["APISIX"].ambiguous and rows["Apache APISIX"].ambiguous
    assert rows["Apache APISIX"].overlaps == ("API", "APISIX")  # plain containment: "API" is in "APISIX" too


def test_the_map_is_computed_once_per_snapshot(tmp_path):
    index = _index(tmp_path)
    first = keyword_map(index.snapshot)
    assert keyword_map(index.snapshot) is first
    write_doc(tmp_path, "knowledge_base/gateway/new.md", doc("New", ["APISIX"]))
    index.refresh("knowledge_base/gateway/new.md")
    assert keyword_map(index.snapshot) is not first
    assert {r.keyword: r for r in keyword_map(index.snapshot)}["APISIX"].hits == 3


@pytest.mark.parametrize("keyword, expected", [
    ("APISIX", {"knowledge_base/gateway/routes.md": True, "knowledge_base/gateway/intro.md": False}),
    ("2.0", {"knowledge_base/gateway/limit.md": True}),  # weak: the documents carrying it, L0 ignores it
])
def test_keyword_hits_say_whether_a_document_claims_the_keyword(tmp_path, keyword, expected):
    hits = keyword_hits(_index(tmp_path).snapshot, keyword)
    assert {h.file_path: h.claims for h in hits} == expected


def test_a_row_counts_documents_and_pages_the_same_way_as_its_columns():
    """The table's "documents" column counts files; the explanation counted pages (translations once) and said
    "documents" - "documents 3" beside "claimed by 2"."""
    from kb_core.keywords.map import KeywordRow

    row = KeywordRow("限流", ("kb/en/limit.md", "kb/zh/limit.md", "kb/en/quota.md"), hits=2, pages=2)
    assert row.explain().startswith("claimed by 2 pages (3 documents: a page's translations count once)")
    same = KeywordRow("quota", ("kb/en/limit.md", "kb/en/quota.md"), hits=2, pages=2)
    assert same.explain().startswith("claimed by 2 documents")

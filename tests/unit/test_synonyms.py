"""Curator synonyms: any word of a group stands for the group's keywords in L0, under both
matching rules, explained as "via synonym"; the groups live in the knowledge base's `_synonyms.yaml` (and
settings), are edited through the facade by curators, and are picked up again when the file changes."""

from __future__ import annotations

import time

import pytest
from support.documents import doc, write_doc

from kb_core import Actor, Role
from kb_core.console import AccessDeniedError
from kb_core.documents.synonyms import SYNONYMS_FILE, as_lines, clean_groups, parse_lines
from kb_core.errors import InvalidInputError
from kb_core.keywords.index import KnowledgeIndex

LIMIT = "knowledge_base/gateway/limit-req.md"
LIMIT_ZH = "knowledge_base/gateway-zh/limit-req.md"
CORS = "knowledge_base/gateway/cors.md"


@pytest.fixture
def root(tmp_path):
    write_doc(tmp_path, LIMIT, doc("limit-req", ["limit-req", "leaky bucket"]))
    write_doc(tmp_path, LIMIT_ZH, doc("limit-req 限流", ["limit-req", "限流"]))
    write_doc(tmp_path, CORS, doc("CORS", ["CORS", "cross-origin"]))
    (tmp_path / "knowledge_base" / SYNONYMS_FILE).write_text(
        "- [限流, rate limiting, request smoothing]\n- [cross-origin, 跨域]\n", encoding="utf-8")
    return tmp_path


def index_of(root, **kwargs) -> KnowledgeIndex:
    index = KnowledgeIndex("knowledge_base", app_root=root, **kwargs)
    index.load()
    return index


@pytest.mark.parametrize("matching", ["words", "substring"])
def test_a_synonym_in_the_query_matches_as_the_keyword_would(root, matching):
    index = index_of(root, matching=matching)
    assert [m.entry.file_path for m in index.match("how does rate limiting work")] == [LIMIT_ZH]
    hit = index.match("跨域请求被拦截")[0]
    assert hit.entry.file_path == CORS and hit.keywords == ("cross-origin",)
    assert hit.via_synonym == (("cross-origin", "跨域"),)
    assert hit.explain() == ["query contains “跨域”, via synonym of “cross-origin”"]
    # a group member that is a keyword itself still matches directly, and brings the group's other keywords
    assert {m.entry.file_path for m in index.match("限流")} == {LIMIT_ZH}


def test_the_word_rule_applies_to_synonyms_too(root):
    index = index_of(root)
    assert len(index.match("generate rate limitingX reports")) == 0  # not a whole word
    assert len(index_of(root, matching="substring").match("generate rate limitingX reports")) == 1


def test_without_the_file_nothing_changes(root):
    (root / "knowledge_base" / SYNONYMS_FILE).unlink()
    index = index_of(root)
    assert len(index.match("how does rate limiting work")) == 0 and index.synonyms() == ()


def test_groups_from_settings_are_added(root):
    index = index_of(root, synonyms=[["leaky bucket", "漏桶"]])
    assert [m.entry.file_path for m in index.match("漏桶算法")] == [LIMIT]
    assert len(index.synonyms()) == 3


def test_a_changed_file_is_picked_up_and_a_broken_one_keeps_the_groups(root):
    index = index_of(root)
    path = root / "knowledge_base" / SYNONYMS_FILE
    path.write_text("- [CORS, 同源策略]\n- [限流, rate limiting, request smoothing]\n", encoding="utf-8")
    deadline = time.monotonic() + 10
    while not index.reload_synonyms():  # the follower calls this every few seconds
        assert time.monotonic() < deadline, "the changed file was not picked up"
        time.sleep(0.05)  # the file's time stamp may need to move on
    assert [m.entry.file_path for m in index.match("同源策略")] == [CORS]
    path.write_text("- [unclosed\n", encoding="utf-8")
    index.reload_synonyms(force=True)
    assert [m.entry.file_path for m in index.match("同源策略")] == [CORS]  # kept


def test_groups_are_validated():
    assert clean_groups([["a b", "A B"], ["x", "y", "x"]]) == (("x", "y"),)  # one word alone is no group
    assert parse_lines("限流, rate limiting\n\ncross-origin,跨域") == (("限流", "rate limiting"),
                                                                      ("cross-origin", "跨域"))
    assert as_lines((("a", "b"), ("c", "d"))) == "a, b\nc, d"
    with pytest.raises(InvalidInputError, match="not a list of words"):
        clean_groups([{"a": "b"}])
    with pytest.raises(InvalidInputError, match="expected a list"):
        clean_groups("a, b")


def test_curators_save_synonyms_through_the_facade(open_kb, root):
    kb = open_kb(root)
    with pytest.raises(AccessDeniedError):
        kb.as_user(Actor("vera@example.com", Role.VIEWER)).keywords.save_synonyms("CORS, 同源")
    saved = kb.as_user(Actor("carl@example.com", Role.CURATOR)).keywords.save_synonyms("CORS, 同源\nlimit-req, 漏桶")
    assert saved == (("CORS", "同源"), ("limit-req", "漏桶"))
    assert "同源" in (root / "knowledge_base" / SYNONYMS_FILE).read_text(encoding="utf-8")
    assert kb.lookup("同源").primary.source == CORS
    assert kb.keywords.synonyms() == saved


def test_a_generic_keyword_as_a_synonym_is_warned_about(open_kb, tmp_path):
    for i in range(7):
        write_doc(tmp_path, f"knowledge_base/p/p{i}.md", doc(f"P{i}", ["Plugin", f"p-{i}"]))
    kb = open_kb(tmp_path)
    warnings = kb.keywords.synonym_warnings([["Plugin", "扩展"], ["p-1", "one"]])
    assert len(warnings) == 1 and "“Plugin” is a generic keyword (claimed by 7 pages)" in warnings[0]


def test_the_keyword_map_edits_the_groups(synced_sample):
    from support.console import run_page

    at = run_page("documents", documents_tab="Keyword map")
    assert any(e.label.startswith("Synonyms (0 groups)") for e in at.expander)
    at.text_area(key="synonyms-text").set_value("ERR_TIMEOUT, 支付超时, payment timed out").run()
    next(b for b in at.button if b.label == "Save synonyms").click().run()
    assert not at.exception and any("Saved 1 group(s)" in s.value for s in at.success)
    text = (synced_sample / "knowledge_base" / SYNONYMS_FILE).read_text(encoding="utf-8")
    assert "payment timed out" in text
    from kb_core import load_settings, open_knowledge_base

    kb = open_knowledge_base(load_settings())  # another process reads the file the page wrote
    try:
        assert kb.lookup("my payment timed out").primary.source.endswith("payment-errors.md")
    finally:
        kb.close()


@pytest.mark.parametrize("matching", ["words", "substring"])
def test_a_keyword_named_in_the_query_also_brings_its_synonyms_keywords_on_both_rules(root, matching):
    write_doc(root, "knowledge_base/gateway/smoothing.md", doc("Smoothing", ["request smoothing"]))
    index = index_of(root, matching=matching)
    assert {m.entry.file_path for m in index.match("限流")} == {LIMIT_ZH, "knowledge_base/gateway/smoothing.md"}

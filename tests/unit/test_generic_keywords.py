"""Generic keywords do not decide: a keyword claimed by more pages than `KB_L0_GENERIC_DOCS`
(default the larger of 5 and 1 % of the pages; a page's translations count once) says what kind of page it
is, not which one. The lookup logic is tested here with a recording L1; `test_evaluate.py` measures it on the
fixture documentation with the real stores."""

from __future__ import annotations

import pytest
from support.documents import doc, write_doc
from support.fakes import RecordingL1
from support.stores import make_settings

from kb_core import HybridLookup, KnowledgeIndex, L1Hit
from kb_core.keywords.matching import generic_limit
from kb_core.retrieval.decision import (
    DECIDED_GENERIC,
    DECIDED_GENERIC_MISS,
    DECIDED_SUBSTRING,
    DECIDED_TIE,
    DECIDED_UNIQUE,
)
from kb_core.retrieval.lookup import MAX_ALTERNATIVES

PLUGINS = ["cors", "acl", "jwt", "cache", "gzip", "echo", "redirect", "mocking"]


def page(name: str) -> str:
    return f"knowledge_base/plugins/{name}.md"


@pytest.fixture
def tree(tmp_path):
    """Eight plugin pages, all claiming the generic "Lumen Plugin", each with its own specific keyword; two
    pages share a specific keyword (a tie); an English/Chinese pair."""
    for name in PLUGINS:
        write_doc(tmp_path, page(name), doc(f"The {name} plugin", ["Lumen Plugin", f"plugin-{name}"],
                                            body=f"# {name}\n\nHow {name} works, in detail.\n"))
    write_doc(tmp_path, "knowledge_base/guide/auth-a.md", doc("Auth A", ["consumer auth", "Lumen Plugin"]))
    write_doc(tmp_path, "knowledge_base/guide/auth-b.md", doc("Auth B", ["consumer auth"]))
    return tmp_path


def index_of(root, **kwargs) -> KnowledgeIndex:
    index = KnowledgeIndex("knowledge_base", app_root=root, **kwargs)
    index.load()
    return index


def hit(source: str, content: str = "a passage that the primary does not show at all", score: float = 0.03,
        retrievers: tuple[str, ...] = ("bm25",)) -> L1Hit:
    return L1Hit(content=content, source=source, score=score, retrievers=retrievers)


def test_the_default_limit_is_the_larger_of_five_and_one_percent_of_the_pages():
    assert generic_limit(10) == 5 and generic_limit(500) == 5 and generic_limit(501) == 6
    assert generic_limit(19_100) == 191 and generic_limit(10, configured=2) == 2


def test_hits_on_a_generic_keyword_alone_are_decided_by_l1(tree):
    index = index_of(tree)
    assert index.snapshot.generic_limit == 5 and len(index.match("Lumen Plugin")) == 9
    l1 = RecordingL1([hit("knowledge_base/elsewhere/not-a-hit.md"), hit(page("gzip")), hit(page("cors"))])
    result = HybridLookup(index, l1).lookup("How do I turn on compression with a Lumen Plugin?")
    assert l1.calls, "L1 decides: it must be called"
    assert result.primary.source == page("gzip") and result.primary.confidence == "low"
    assert result.trace.decision == DECIDED_GENERIC
    assert "only generic keywords matched (“Lumen Plugin” is claimed by 9 pages)" in result.trace.primary_reason
    assert result.trace.l0_matches[0].entry.file_path == page("gzip")
    # the supplement comes from another page than the primary
    assert result.supplement.source != page("gzip")


def test_generic_hits_that_l1_does_not_rank_make_an_l0_miss_led_by_l1(tree):
    index = index_of(tree)
    other = "knowledge_base/guide/auth-b.md"  # not claiming the generic keyword
    l1 = RecordingL1([hit(other, score=0.05)])
    result = HybridLookup(index, l1).lookup("Which Lumen Plugin checks credentials of a consumer?")
    data = result.to_dict()
    assert data["primary"] is None and data["found"] is True
    assert data["supplement"]["source"] == other and data["supplement"]["retrievers"] == ["bm25"]
    assert result.trace.decision == DECIDED_GENERIC_MISS
    assert result.trace.l0_count == 9 and len(result.trace.l0_matches) == 9  # the generic matches, listed
    # unsure: the generic hits are offered as alternatives, one per page, at most five
    assert 0 < len(data["alternatives"]) <= MAX_ALTERNATIVES
    assert all("generic" in a["why"] and a["source"] != other for a in data["alternatives"])


def test_nothing_relevant_in_l1_and_only_generic_hits_is_not_found(tree):
    result = HybridLookup(index_of(tree), RecordingL1([])).lookup("Is there a Lumen Plugin for brewing coffee?")
    assert result.to_dict() == {"found": False, "primary": None, "supplement": None}


def test_when_l1_fails_the_generic_hits_still_answer(tree):
    result = HybridLookup(index_of(tree), RecordingL1(error=RuntimeError("down"))).lookup("Lumen Plugin")
    assert result.primary is not None and result.primary.confidence == "low" and result.trace.l1_error


def test_a_specific_keyword_still_answers_high_without_l1(tree):
    l1 = RecordingL1([hit(page("cors"))])
    result = HybridLookup(index_of(tree), l1).lookup("Configure plugin-gzip for JSON")
    assert result.primary.source == page("gzip") and result.primary.confidence == "high"
    assert l1.calls == [] and result.trace.decision == DECIDED_UNIQUE
    assert "alternatives" not in result.to_dict()


def test_a_specific_keyword_beside_a_generic_one_ranks_first_but_stays_low(tree):
    # Measured: answering `high` here (ignoring the generic hits) made 1.9 % of the fixture answers confidently
    # wrong instead of 0.5 %: a specific keyword named in passing is not always the subject.
    l1 = RecordingL1([hit(page("cors"))])
    result = HybridLookup(index_of(tree), l1).lookup("Configure the plugin-gzip Lumen Plugin for JSON")
    assert result.primary.source == page("gzip") and result.primary.confidence == "low"
    assert l1.calls and result.supplement.source == page("cors")


def test_a_tie_on_a_specific_keyword_keeps_an_l0_primary_and_names_the_other_page(tree):
    l1 = RecordingL1([hit("knowledge_base/elsewhere/x.md"), hit("knowledge_base/guide/auth-b.md")])
    result = HybridLookup(index_of(tree), l1).lookup("consumer auth")
    assert result.primary.source == "knowledge_base/guide/auth-b.md"  # L1's order broke the tie
    assert result.trace.decision == DECIDED_TIE
    sources = [a.source for a in result.alternatives]
    assert "knowledge_base/guide/auth-a.md" in sources and "knowledge_base/guide/auth-b.md" not in sources


def test_the_literal_rule_ignores_genericity(tree):
    index = index_of(tree, matching="substring")
    l1 = RecordingL1([hit("knowledge_base/guide/auth-b.md")])
    result = HybridLookup(index, l1).lookup("Lumen Plugin")
    assert result.primary is not None and result.trace.decision == DECIDED_SUBSTRING


def test_translations_count_once_toward_the_limit(tmp_path):
    # four pages in two languages each: eight files, four claimants — specific; a tie broken by L1
    for i in range(4):
        for lang in ("en", "zh"):
            write_doc(tmp_path, f"knowledge_base/docs/{lang}/p{i}.md", doc(f"P{i} {lang}", ["Gateway Route"]))
    index = index_of(tmp_path, generic_docs=4)
    assert index.snapshot.pages == 4 and not index.match("Gateway Route").is_generic(4)
    result = HybridLookup(index, RecordingL1([hit("knowledge_base/docs/zh/p2.md")])).lookup("Gateway Route")
    assert result.primary.source == "knowledge_base/docs/en/p2.md"  # the query's language; L1's page
    assert result.trace.decision == DECIDED_TIE
    index = index_of(tmp_path, generic_docs=3)
    result = HybridLookup(index, RecordingL1([hit("knowledge_base/docs/zh/p2.md")])).lookup("Gateway Route")
    assert result.trace.decision == DECIDED_GENERIC and result.primary.source == "knowledge_base/docs/en/p2.md"
    # one alternative per page, in the query's language
    assert all("/en/" in a.source for a in result.alternatives)
    assert len({a.source for a in result.alternatives}) == len(result.alternatives) == 3


def test_the_limit_is_a_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_L0_GENERIC_DOCS", "40")
    assert make_settings(tmp_path).l0_generic_docs == 40


def test_a_typo_of_an_identifier_gets_suggestions_and_found_stays_honest(tree):
    result = HybridLookup(index_of(tree), RecordingL1([])).lookup("plugin-gizp")
    data = result.to_dict()
    assert data["found"] is False and data["primary"] is None
    assert data["suggestions"] == [{"keyword": "plugin-gzip", "source": page("gzip"), "title": "The gzip plugin"}]
    assert "suggest" in result.trace.timings_ms
    # a hit needs no suggestion; a plain sentence gets none either
    assert "suggestions" not in HybridLookup(index_of(tree), RecordingL1([])).lookup("plugin-gzip").to_dict()
    assert "suggestions" not in HybridLookup(index_of(tree), RecordingL1([])).lookup("brewing coffee").to_dict()

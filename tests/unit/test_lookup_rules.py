"""The lookup's decision rules one by one (`kb_core.retrieval.decision`): each test builds a rule's inputs (its
`Facts`, over a small real L0 index) and checks the rule's verdict, without running a lookup. `test_lookup.py`,
`test_generic_keywords.py` and `test_decide_together.py` check the same rules through whole lookups."""

from __future__ import annotations

import dataclasses

import pytest
from support.documents import doc, write_doc

from kb_core import KnowledgeIndex
from kb_core.retrieval import decision
from kb_core.retrieval.decision import (
    DECIDED_GENERIC,
    DECIDED_GENERIC_MISS,
    DECIDED_MENTION_AGREE,
    DECIDED_MENTION_L0,
    DECIDED_MENTION_L1,
    DECIDED_MISS,
    DECIDED_NOTHING,
    DECIDED_RANKED,
    DECIDED_SUBSTRING,
    DECIDED_TIE,
    DECIDED_TITLE,
    DECIDED_TITLE_L1,
    DECIDED_UNIQUE,
    DECISION_RULES,
    L1_CALLED_GENERIC,
    L1_CALLED_MENTION,
    L1_CALLED_NONE,
    L1_CALLED_SEVERAL,
    L1_CALLED_TITLE,
    L1_RULES,
    L1_SKIPPED_BLANK,
    L1_SKIPPED_UNIQUE,
    Facts,
    Verdict,
    confidence,
    l1_rule,
    mentions_only,
    read_hits,
    settled,
    with_titles,
)
from kb_core.retrieval.reading import PRIMARY_MAX_CHARS

ALPHA = "knowledge_base/plugins/alpha.md"
BETA = "knowledge_base/plugins/beta.md"
GAMMA = "knowledge_base/plugins/gamma.md"
TRACES = "knowledge_base/guide/traces.md"
OBSERVABILITY = "knowledge_base/guide/observability.md"
BETA_GUIDE = "knowledge_base/guide/beta.md"

SENTENCE = "How do I turn on the gamma feature for every node in a large cluster?"
WINDOW = "Is a fixed window used by the counter or by the sliding log?"  # "fixed window": 39 % of its content


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """"Lumen" is generic (three claimants, over the limit of two); "shared kw" ties two pages; two pages are
    titled "Beta"; "traces" is one page's keyword and another page's title."""
    root = tmp_path_factory.mktemp("rules")
    write_doc(root, ALPHA, doc("Alpha", ["shared kw", "alpha-key", "Lumen"], body="# Alpha\n\nAlpha text.\n"))
    write_doc(root, BETA, doc("Beta", ["shared kw", "Lumen"], body="# Beta\n\nBeta text.\n"))
    write_doc(root, GAMMA, doc("Gamma", ["gamma", "fixed window", "Lumen"], body="# Gamma\n\nGamma text.\n"))
    write_doc(root, TRACES, doc("Traces", ["span export"], body="# Traces\n\nSpans.\n"))
    write_doc(root, OBSERVABILITY, doc("Observability", ["traces", "server"], body="# Observability\n\nAll.\n"))
    write_doc(root, BETA_GUIDE, doc("Beta", ["second guide"], body="# Beta guide\n\nAnother beta.\n"))
    return root


@pytest.fixture(scope="module")
def index(root) -> KnowledgeIndex:
    built = KnowledgeIndex("knowledge_base", app_root=root, generic_docs=2)
    built.load()
    return built


@pytest.fixture(scope="module")
def literal(root) -> KnowledgeIndex:
    """The same pages under KB_L0_MATCHING=substring."""
    built = KnowledgeIndex("knowledge_base", app_root=root, matching="substring", generic_docs=2)
    built.load()
    return built


class Gone:
    """The index's pages, with some files deleted by hand since it was built."""

    def __init__(self, index: KnowledgeIndex, *gone: str):
        self.index, self.gone = index, set(gone)

    def get(self, file_path):
        return self.index.get(file_path)

    def excerpt(self, file_path, max_chars=2000, *, clean=False):
        return None if file_path in self.gone else self.index.excerpt(file_path, max_chars, clean=clean)


def facts(index: KnowledgeIndex, query: str, **fields) -> Facts:
    """A rule's input as stated: the real hits of `query`, the rest of the facts as given."""
    matches = index.match(query)
    fields.setdefault("stale", [])
    if fields.get("first") is not None:
        fields.setdefault("content", text(index, matches[fields["first"]].entry.file_path))
    return Facts(query=query, matches=matches, matching=index.matching, **fields)


def text(index: KnowledgeIndex, path: str) -> str | None:
    return index.excerpt(path, PRIMARY_MAX_CHARS, clean=True)


def rule(name: str) -> decision.DecisionRule:
    return next(r for r in DECISION_RULES if r.name == name)


def verdict_of(name: str, given: Facts, pages) -> Verdict:
    """The verdict of rule `name`, which must be the first that applies, named by one of its own lines."""
    first = next(r for r in DECISION_RULES if r.applies(given))
    assert first.name == name
    found = first.decide(given, pages)
    assert found.decision in first.decisions
    return found


# -- what L0 found ------------------------------------------------------------------------------------------
def test_read_hits_counts_pages_and_sees_generic_keywords(index, literal):
    generic = read_hits("Lumen", index.match("Lumen"), index, "words")
    assert (generic.first, generic.pages, generic.generic, generic.stale) == (0, 3, True, [])
    assert generic.content == text(index, generic.matches[0].entry.file_path)
    specific = read_hits("shared kw", index.match("shared kw"), index, "words")
    assert (specific.pages, specific.generic) == (2, False)
    # the literal rule never calls a keyword generic
    assert read_hits("Lumen", literal.match("Lumen"), literal, "substring").generic is False
    assert read_hits("no such words", index.match("no such words"), index, "words").first is None


def test_read_hits_reports_a_hit_whose_file_is_gone_and_serves_the_next(index):
    matches = index.match("Lumen")
    gone = matches[0].entry.file_path
    found = read_hits("Lumen", matches, Gone(index, gone), "words")
    assert found.stale == [gone] and found.first == 1 and found.pages == 2
    assert found.content == text(index, matches[1].entry.file_path)


def test_a_sentence_only_mentions_its_keywords_and_a_keyword_query_does_not(index):
    assert mentions_only(read_hits(SENTENCE, index.match(SENTENCE), index, "words"))
    assert not mentions_only(read_hits("gamma", index.match("gamma"), index, "words"))
    # a joined name that a keyword is only part of is another thing than the keyword
    assert mentions_only(read_hits("tidb-server", index.match("tidb-server"), index, "words"))
    assert not mentions_only(read_hits("server", index.match("server"), index, "words"))
    # generic hits are decided by L1, not weighed
    assert not mentions_only(read_hits("Lumen", index.match("Lumen"), index, "words"))


def test_a_title_is_weighed_unless_the_exact_keyword_names_that_same_page(index):
    def weighed(query: str, stale: tuple[str, ...] = ()) -> Facts:
        found = read_hits(query, index.match(query), index, "words")
        found.stale.extend(stale)
        return with_titles(found, index.titled(query), index)

    # "traces" is Observability's keyword and Traces' title: two curated names disagree
    assert weighed("traces").weigh and [e.file_path for e in weighed("traces").titled] == [TRACES]
    # "gamma" is Gamma's keyword and Gamma's title: the spec's unique hit
    assert not weighed("gamma").weigh and weighed("gamma").titled
    # no keyword, two pages titled so
    assert weighed("Beta").weigh and len(weighed("Beta").titled) == 2
    # a titled page whose file is gone names nothing
    assert not weighed("traces", stale=(TRACES,)).weigh and weighed("traces", stale=(TRACES,)).titled == ()


# -- does L0 answer alone? ----------------------------------------------------------------------------------
def test_the_l1_rules_in_order():
    assert [(r.reason, r.calls) for r in L1_RULES] == [
        (L1_SKIPPED_UNIQUE, False), (L1_SKIPPED_BLANK, False), (L1_CALLED_MENTION, True), (L1_CALLED_TITLE, True),
        (L1_CALLED_GENERIC, True), (L1_CALLED_SEVERAL, True), (L1_CALLED_NONE, True)]


@pytest.mark.parametrize(("fields", "reason"), [
    ({"pages": 1}, L1_SKIPPED_UNIQUE),
    ({"pages": 1, "query": "   "}, L1_SKIPPED_UNIQUE),  # the first rule that applies wins
    ({"pages": 0, "query": "   "}, L1_SKIPPED_BLANK),
    ({"pages": 0, "query": None}, L1_SKIPPED_BLANK),
    ({"pages": 1, "weigh": True, "mention": True}, L1_CALLED_MENTION),
    ({"pages": 0, "weigh": True}, L1_CALLED_TITLE),
    ({"pages": 1, "weigh": True}, L1_CALLED_TITLE),
    ({"pages": 1, "generic": True}, L1_CALLED_GENERIC),
    ({"pages": 4, "generic": True}, L1_CALLED_GENERIC),
    ({"pages": 2}, L1_CALLED_SEVERAL),
    ({"pages": 0}, L1_CALLED_NONE),
])
def test_which_l1_rule_applies(fields, reason):
    given = Facts(query=fields.pop("query", "a query"), matches=(), stale=[], **fields)
    chosen = l1_rule(given)
    assert chosen.reason == reason and chosen.calls == (reason not in (L1_SKIPPED_UNIQUE, L1_SKIPPED_BLANK))


# -- which page is the primary ------------------------------------------------------------------------------
def test_the_decision_rules_in_order_and_the_lines_they_show():
    assert [(r.name, r.decisions) for r in DECISION_RULES] == [
        ("weigh the evidence", (DECIDED_MENTION_AGREE, DECIDED_MENTION_L0, DECIDED_TITLE, DECIDED_MENTION_L1,
                                DECIDED_TITLE_L1)),
        ("L1 picks among generic hits", (DECIDED_GENERIC, DECIDED_GENERIC_MISS)),
        ("index order", (DECIDED_SUBSTRING,)),
        ("the rarest keyword", (DECIDED_TIE, DECIDED_RANKED)),
        ("the one page", (DECIDED_UNIQUE,)),
        ("a generic hit without L1", (DECIDED_RANKED,)),
        ("no hit", (DECIDED_MISS,)),
    ]
    shown = {line for r in DECISION_RULES for line in r.decisions}
    every = {v for k, v in vars(decision).items() if k.startswith("DECIDED_")}
    assert every - shown == {DECIDED_NOTHING}  # `settled` gives that one, once the supplement is known


@pytest.mark.parametrize(("fields", "name"), [
    ({"weigh": True, "first": 0, "pages": 1, "l1_sources": ("x.md",)}, "weigh the evidence"),
    ({"weigh": True, "titled": ("an entry",)}, "weigh the evidence"),
    # weighing needs evidence from L1 or a title: without either, the keyword hit answers
    ({"weigh": True, "first": 0, "pages": 1}, "the one page"),
    ({"first": 0, "pages": 3, "generic": True}, "L1 picks among generic hits"),
    ({"first": 0, "pages": 3, "generic": True, "l1_failed": True}, "the rarest keyword"),
    ({"first": 0, "pages": 1, "generic": True, "l1_failed": True}, "a generic hit without L1"),
    ({"first": 0, "pages": 2, "matching": "substring"}, "index order"),
    ({"first": 0, "pages": 2}, "the rarest keyword"),
    ({"first": 0, "pages": 1}, "the one page"),
    ({"first": None, "l1_sources": ("x.md",)}, "no hit"),
])
def test_which_decision_rule_applies(fields, name):
    given = Facts(query="a query", matches=(), stale=[], **fields)
    assert next(r for r in DECISION_RULES if r.applies(given)).name == name


def test_weighing_a_sentence_l1s_page_leads_when_the_keyword_is_said_in_passing(index):
    given = facts(index, SENTENCE, first=0, pages=1, mention=True, weigh=True, l1_sources=(TRACES, GAMMA))
    found = verdict_of("weigh the evidence", given, index)
    assert found == Verdict(DECIDED_MENTION_L1, None, None, found.reason, False)
    assert found.reason.startswith("L1 ranks that page first (score 1.00)")


def test_weighing_a_sentence_both_tiers_agree_on_the_one_page(index):
    given = facts(index, WINDOW, first=0, pages=1, mention=True, weigh=True, l1_sources=(GAMMA, TRACES))
    found = verdict_of("weigh the evidence", given, index)
    assert found.decision == DECIDED_MENTION_AGREE and found.agree and found.chosen.entry.file_path == GAMMA
    assert found.content == text(index, GAMMA) and confidence(given, found) == "high"
    assert "L1 rank 1" in found.reason


def test_weighing_a_sentence_a_keyword_covering_much_of_it_outweighs_l1s_first_page(index):
    given = facts(index, WINDOW, first=0, pages=1, mention=True, weigh=True, l1_sources=(TRACES, GAMMA))
    found = verdict_of("weigh the evidence", given, index)
    assert found.decision == DECIDED_MENTION_L0 and found.chosen.entry.file_path == GAMMA and not found.agree
    assert "“fixed window” covers" in found.reason and "L1 rank 2" in found.reason
    assert confidence(given, found) == "low"


def test_weighing_both_tiers_agree_only_on_the_one_page_l0_names(index):
    given = facts(index, WINDOW, first=0, pages=2, mention=True, weigh=True, l1_sources=(GAMMA, TRACES))
    found = verdict_of("weigh the evidence", given, index)
    assert found.decision == DECIDED_MENTION_L0 and found.chosen.entry.file_path == GAMMA and not found.agree


def test_weighing_a_generic_keyword_is_no_evidence(index):
    # each "Lumen" page would score 4 × 0.8 / 3 > 1 for L1's first page, were a generic keyword evidence
    given = facts(index, "Lumen", first=0, pages=3, mention=True, weigh=True, l1_sources=(TRACES,))
    assert verdict_of("weigh the evidence", given, index).decision == DECIDED_MENTION_L1


def test_weighing_a_title_the_titled_page_wins_or_l1_leads(index):
    titled = tuple(index.titled("Beta"))
    given = facts(index, "Beta", titled=titled, weigh=True)
    assert len(given.matches) == 0 and len(titled) == 2
    found = verdict_of("weigh the evidence", given, index)
    assert found.decision == DECIDED_TITLE and found.chosen.entry.file_path == titled[0].file_path
    assert "its title is the query" in found.reason and found.chosen.keywords == ()
    # two pages share the title: each weighs half, less than L1's first page
    found = verdict_of("weigh the evidence", dataclasses.replace(given, l1_sources=(ALPHA,)), index)
    assert found.decision == DECIDED_TITLE_L1 and found.chosen is None


def test_weighing_skips_a_page_whose_file_is_gone(index):
    given = facts(index, WINDOW, first=0, pages=1, mention=True, weigh=True, l1_sources=(GAMMA, TRACES))
    found = verdict_of("weigh the evidence", given, Gone(index, GAMMA))
    assert given.stale == [GAMMA] and found.decision == DECIDED_MENTION_L1 and found.chosen is None


def test_l1_picks_the_generic_hit_it_ranks_best(index):
    given = facts(index, "Lumen", first=0, pages=3, generic=True, l1_sources=(TRACES, BETA, ALPHA))
    found = verdict_of("L1 picks among generic hits", given, index)
    assert found.decision == DECIDED_GENERIC and found.chosen.entry.file_path == BETA
    assert found.content == text(index, BETA)
    assert found.reason == ("only generic keywords matched (“Lumen” is claimed by 3 pages); L1 ranks this page "
                            "highest among them")


def test_l1_ranking_none_of_the_generic_hits_is_an_l0_miss(index):
    found = verdict_of("L1 picks among generic hits",
                       facts(index, "Lumen", first=0, pages=3, generic=True, l1_sources=(TRACES,)), index)
    assert found == Verdict(DECIDED_GENERIC_MISS)


def test_l1_passes_over_a_generic_hit_whose_file_is_gone(index):
    given = facts(index, "Lumen", first=0, pages=3, generic=True, l1_sources=(BETA, GAMMA))
    found = verdict_of("L1 picks among generic hits", given, Gone(index, BETA))
    assert found.chosen.entry.file_path == GAMMA and given.stale == [BETA]


def test_l1_passes_over_a_generic_hit_already_found_stale(index):
    given = facts(index, "Lumen", first=0, pages=3, generic=True, l1_sources=(BETA, GAMMA), stale=[BETA])
    assert verdict_of("L1 picks among generic hits", given, index).chosen.entry.file_path == GAMMA


def test_the_literal_rule_takes_the_first_hit_in_index_order(literal):
    given = facts(literal, "shared kw", first=0, pages=2, l1_sources=(BETA,))
    found = verdict_of("index order", given, literal)
    assert found.decision == DECIDED_SUBSTRING and found.chosen is given.matches[0]
    assert found.reason == "first in index order (KB_L0_MATCHING=substring)"


def test_a_tie_on_the_rarest_keyword_goes_to_l1s_order(index):
    given = facts(index, "shared kw", first=0, pages=2, l1_sources=(TRACES, BETA))
    found = verdict_of("the rarest keyword", given, index)
    assert found.decision == DECIDED_TIE and found.chosen.entry.file_path == BETA
    assert found.content == text(index, BETA)
    assert found.reason == "tied with 1 other document(s) on “shared kw” (claimed by 2); L1 ranks it highest"
    # without L1's order, the first in index order
    found = verdict_of("the rarest keyword", dataclasses.replace(given, l1_sources=()), index)
    assert found.decision == DECIDED_TIE and found.chosen is given.matches[0]
    assert found.reason.endswith("; first in index order")


def test_the_rarest_keyword_ranks_first(index):
    given = facts(index, "alpha-key shared kw", first=0, pages=2, l1_sources=(BETA,))
    found = verdict_of("the rarest keyword", given, index)
    assert found.decision == DECIDED_RANKED and found.chosen.entry.file_path == ALPHA
    assert found.reason == "“alpha-key” is claimed by 1 document; “shared kw” by 2"


def test_the_one_page_answers_from_l0(index):
    given = facts(index, "alpha-key", first=0, pages=1, content="the text read")
    found = verdict_of("the one page", given, index)
    assert found == Verdict(DECIDED_UNIQUE, given.matches[0], "the text read")
    assert confidence(given, found) == "high"
    # the same page when the query was to be weighed but L1 had nothing to weigh it with: unsure
    assert confidence(dataclasses.replace(given, weigh=True), found) == "low"


def test_a_generic_hit_without_l1_keeps_its_rank_unsure(index):
    given = facts(index, "Lumen", first=0, pages=1, generic=True, l1_failed=True)
    found = verdict_of("a generic hit without L1", given, index)
    assert found.decision == DECIDED_RANKED and found.chosen is given.matches[0]
    assert confidence(given, found) == "low"


def test_no_hit_is_l1s_answer_or_not_found(index):
    given = facts(index, "nothing like it", l1_sources=(TRACES,))
    found = verdict_of("no hit", given, index)
    assert found == Verdict(DECIDED_MISS)
    assert settled(found.decision, found=True) == DECIDED_MISS
    assert settled(found.decision, found=False) == DECIDED_NOTHING
    assert settled(DECIDED_GENERIC_MISS, found=False) == DECIDED_GENERIC_MISS

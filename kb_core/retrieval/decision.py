"""Which rule decides a lookup's answer, as two short ordered lists of named rules (the spec's rule that one
specific L0 hit answers alone, with its literal substring rule as a mode: docs/matching.md, docs/decisions.md).
In each, the first rule that applies wins.

- `L1_RULES`: whether L0 answers alone or L1 is called, and why: each rule is named by its line in the console's
  "why" panel ("**L1** — ...", `LookupTrace.l1_reason`).
- `DECISION_RULES`: how the primary is chosen among L0's hits, given L1's ranks: each rule picks the primary and
  names its verdict by one of its lines in the "why" panel ("**Decided by** — ...", `LookupTrace.decision`).

The rules read `Facts` (what L0 matched and reading its hits showed, then L1's order of pages) and, to choose a
primary, the pages' text through `Pages` (the L0 index). `lookup.HybridLookup` runs the steps around them:
L0 match -> `read_hits` and `with_titles` -> `l1_rule` -> L1 search -> `decide` -> the primary (its `confidence`),
the supplement, `settled` -> the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from kb_core.keywords.entry import KnowledgeEntry
from kb_core.keywords.index import L0Match, RankedMatches
from kb_core.retrieval.reading import PRIMARY_MAX_CHARS
from kb_core.terms import identifiers

TRACE_MATCHES = 20  # the "why" panel lists this many L0 hits and "and N more"

# Why L1 did or did not run; the console's "why" panel shows these.
L1_SKIPPED_UNIQUE = "unique L0 hit: L1 not called"
L1_SKIPPED_BLANK = "blank query: nothing to search"
L1_CALLED_SEVERAL = "several L0 hits: L1 called to supplement"
L1_CALLED_NONE = "no L0 hit: L1 called"
L1_CALLED_GENERIC = "only generic keywords matched: L1 called to decide"
L1_CALLED_MENTION = "the query only mentions keywords: L1 called to weigh the evidence"
L1_CALLED_TITLE = "the query is a page's title: L1 called to weigh the evidence"

# Which rule decided the answer, in one line (the "why" panel's first line).
DECIDED_UNIQUE = "one page matched a specific keyword: answered from L0 with confidence high (L1 not called)"
DECIDED_RANKED = "several pages matched: the rarest keyword decided (confidence low)"
DECIDED_TIE = "several pages tie on the rarest keyword: L1's order broke the tie (confidence low)"
DECIDED_GENERIC = "only generic keywords matched: L1 ranks this page best among them (confidence low)"
DECIDED_GENERIC_MISS = ("only generic keywords matched and L1 ranks none of those pages among its best: "
                        "answered as an L0 miss (L1 leads)")
DECIDED_MISS = "no keyword matched: L1 answers"
DECIDED_NOTHING = "no keyword matched and L1 found nothing relevant: not found"
DECIDED_SUBSTRING = "KB_L0_MATCHING=substring: the first hit in index order (the spec's literal rule)"
DECIDED_MENTION_AGREE = ("the query only mentions keywords; the one page they name is also L1's best: both tiers "
                         "agree (confidence high)")
DECIDED_MENTION_L0 = "the query only mentions keywords: weighed with L1's ranks, a keyword page ranks first (low)"
DECIDED_MENTION_L1 = ("the query only mentions keywords: weighed with them, L1's best page ranks first (L1 leads; "
                      "the keyword pages are alternatives)")

DECIDED_TITLE = "the query is this page's title; weighed with L1's ranks and the keywords, it ranks first (low)"
DECIDED_TITLE_L1 = ("the query is a page's title, but weighed with the keywords and L1's ranks, L1's best page ranks "
                    "first (L1 leads)")

# A query whose matched keywords cover less than this share of its content (letters and digits, less filler
# words) only *mentions* them: a sentence or a question. Its L0 hits are evidence weighed with L1's ranks, not
# the answer (docs/matching.md). Keyword queries ("ERR_TIMEOUT", "超时", "支付网关超时问题") keep the spec's rule.
KEYWORD_QUERY_SHARE = 0.5
# Evidence weights: L1's rank r (0-based) of a page gives 1 / (r + 1); an L0 hit gives this much times the
# share of the query its keywords cover beyond the floor, divided by how many pages claim its rarest keyword.
L0_EVIDENCE_WEIGHT = 4.0
L0_EVIDENCE_FLOOR = 0.2  # a keyword covering a fifth of a sentence or less is a word in passing: no evidence
TITLE_EVIDENCE_WEIGHT = 1.5  # a page whose title is the query, divided by how many pages have that title


class Pages(Protocol):
    """What the rules read of L0 (a `KnowledgeIndex`): a page's entry, and its text (None: the file is gone)."""

    def get(self, file_path: str) -> KnowledgeEntry | None: ...

    def excerpt(self, file_path: str, max_chars: int = 2000, *, clean: bool = False) -> str | None: ...


def page_key(index: Pages, path: str) -> str:
    """A page's language versions share a translation group; a file L0 does not know is its own page."""
    entry = index.get(path)
    return (entry.group or path) if entry is not None else path


@dataclass(frozen=True)
class Facts:
    """What the rules decide on: L0's ranked hits and what reading them showed, then the pages L1 ranks.

    `stale` is the one thing that changes while the rules run: a hit whose file cannot be read (deleted by hand)
    is added to it, so that it is reported in the trace and never served."""

    query: object
    matches: RankedMatches  # the hits as this caller counts them (`HybridLookup._readers_counts`)
    stale: list[str]
    first: int | None = None  # the best ranked hit whose file can be read
    content: str | None = None  # its text
    pages: int = 0  # matched pages that can be read: a page's language versions count once
    matching: str = "words"  # KB_L0_MATCHING
    generic: bool = False  # every hit rests on generic keywords alone
    mention: bool = False  # the query only mentions its keywords (a sentence, a question)
    titled: tuple[KnowledgeEntry, ...] = ()  # readable pages whose title is the query
    weigh: bool = False  # L0's hits are evidence to weigh with L1's ranks, not the answer
    l1_sources: tuple[str, ...] = ()  # the sources of L1's hits, best first
    l1_failed: bool = False  # L1 was called and raised

    @property
    def words(self) -> bool:
        return self.matching == "words"

    @property
    def asks(self) -> bool:
        """Whether there is anything to search for."""
        return isinstance(self.query, str) and bool(self.query.strip())

    @property
    def unique(self) -> bool:
        """Exactly one page matched, on a specific keyword."""
        return self.pages == 1 and not self.generic

    @property
    def answers_alone(self) -> bool:
        """L0 answers without L1 (the spec's rule): one page, on a specific keyword that is the query's."""
        return self.unique and not self.weigh


# -- what L0 found ------------------------------------------------------------------------------------------
def first_readable(pages: Pages, matches: Sequence[L0Match], stale: list[str]) -> tuple[int | None, str | None]:
    """The best ranked hit whose file can be read, and its text; the hits before it go to `stale`."""
    for i in range(len(matches)):
        path = matches[i].entry.file_path
        if path in stale:
            continue
        content = pages.excerpt(path, PRIMARY_MAX_CHARS, clean=True)
        if content is not None:
            return i, content
        stale.append(path)
    return None, None


def read_hits(query: object, matches: RankedMatches, pages: Pages, matching: str) -> Facts:
    """L0's hits once the first readable one is read: how many pages they are, whether they are generic."""
    stale: list[str] = []
    # A matched entry whose file has gone (deleted by hand) cannot answer; it is reported, not served.
    first, content = first_readable(pages, matches, stale)
    # a page's language versions are one answer: "exactly one hit" counts pages, not files
    count = matches.group_count(frozenset(stale)) if first is not None else 0
    # Ranking puts the rarest keyword first: when even the first hit's rarest keyword is generic, every hit
    # rests on generic keywords alone.
    generic = matching == "words" and first is not None and matches.is_generic(matches[first].claimed_by)
    return Facts(query, matches, stale, first, content, count, matching, generic)


def mentions_only(facts: Facts) -> bool:
    """A sentence that merely mentions keywords: every hit's keywords cover a small part of it."""
    if not (facts.words and facts.first is not None and not facts.generic and isinstance(facts.query, str)):
        return False
    head = facts.matches[:TRACE_MATCHES]
    # one joined name (`tidb-server`, `User-Agent`) that a keyword is only a part of (`server`): the name is
    # another thing than the keyword, however much of it the keyword covers
    return max(m.coverage for m in head) < KEYWORD_QUERY_SHARE or (
        _joined_name(facts.query) and not any(m.exact for m in head))


def with_titles(facts: Facts, titled: Sequence[KnowledgeEntry], pages: Pages) -> Facts:
    """`facts` with whether they are weighed: a query that only mentions keywords is, and so is a query that is
    a page's title (titles are curated names), unless its exact keyword names that same page."""
    mention = mentions_only(facts)
    readable = tuple(e for e in titled if e.file_path not in facts.stale)
    # an exact keyword answers as the spec says, unless another page is titled exactly so: then the two
    # curated names disagree, and the evidence decides (confidence low unless L1 agrees)
    weigh = mention or bool(readable) and not _exact_keyword_names_them(facts, readable, pages)
    return replace(facts, mention=mention, titled=readable, weigh=weigh)


def _exact_keyword_names_them(facts: Facts, titled: Sequence[KnowledgeEntry], pages: Pages) -> bool:
    """The first hit's keyword is the whole query, and every titled page is that hit's page."""
    if facts.first is None:
        return False
    first = facts.matches[facts.first]
    return first.exact and all(page_key(pages, e.file_path) == page_key(pages, first.entry.file_path)
                               for e in titled)


# -- does L0 answer alone? ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class L1Rule:
    """Whether L1 is called, and the "why" panel's line that says why."""

    reason: str
    calls: bool
    applies: Callable[[Facts], bool]


L1_RULES: tuple[L1Rule, ...] = (
    L1Rule(L1_SKIPPED_UNIQUE, False, lambda f: f.answers_alone),
    L1Rule(L1_SKIPPED_BLANK, False, lambda f: not f.asks),
    L1Rule(L1_CALLED_MENTION, True, lambda f: f.mention),
    L1Rule(L1_CALLED_TITLE, True, lambda f: f.weigh),
    L1Rule(L1_CALLED_GENERIC, True, lambda f: f.generic),
    L1Rule(L1_CALLED_SEVERAL, True, lambda f: f.pages > 0),
    L1Rule(L1_CALLED_NONE, True, lambda f: True),
)


def l1_rule(facts: Facts) -> L1Rule:
    return next(rule for rule in L1_RULES if rule.applies(facts))


# -- which page is the primary ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """A rule's verdict: its "why" panel line, the hit that becomes the primary (None: L1 leads, or nothing
    matched) with its text, why it won over the other hits, and whether both tiers name it."""

    decision: str
    chosen: L0Match | None = None
    content: str | None = None
    reason: str = ""
    agree: bool = False


@dataclass(frozen=True)
class DecisionRule:
    """One way to choose the primary: when it `applies`, `decide` picks it and names the verdict by one of
    `decisions`, the lines the "why" panel shows for this rule."""

    name: str
    decisions: tuple[str, ...]
    applies: Callable[[Facts], bool]
    decide: Callable[[Facts, Pages], Verdict]


def confidence(facts: Facts, verdict: Verdict) -> str:
    """High when L0 answered alone, or when both tiers name the page; low otherwise."""
    return "high" if (verdict.agree or facts.answers_alone) else "low"


def settled(decision: str, found: bool) -> str:
    """The decision once the supplement is known: a miss that L1 did not answer either is "not found"."""
    return DECIDED_NOTHING if decision == DECIDED_MISS and not found else decision


def decide(facts: Facts, pages: Pages) -> Verdict:
    return next(rule for rule in DECISION_RULES if rule.applies(facts)).decide(facts, pages)


def _weighed(facts: Facts, pages: Pages) -> Verdict:
    chosen, content, reason, agree = weigh_evidence(facts, pages)
    if chosen is None:
        decision = DECIDED_MENTION_L1 if facts.mention else DECIDED_TITLE_L1
    else:
        decision = DECIDED_MENTION_AGREE if agree else DECIDED_TITLE if not chosen.keywords else DECIDED_MENTION_L0
    return Verdict(decision, chosen, content, reason, agree)


def _l1_among_generic(facts: Facts, pages: Pages) -> Verdict:
    chosen, content = l1_pick(facts, pages)
    if chosen is None:
        return Verdict(DECIDED_GENERIC_MISS)
    return Verdict(DECIDED_GENERIC, chosen, content,
                   f"only generic keywords matched (“{chosen.rarest_keyword}” is claimed by {chosen.claimed_by} "
                   "pages); L1 ranks this page highest among them")


def _ranked(facts: Facts, pages: Pages) -> Verdict:
    assert facts.first is not None  # the rule applies to hits only
    first, content, reason = break_tie(facts, pages)
    decision = DECIDED_SUBSTRING if not facts.words else DECIDED_TIE if reason.startswith("tied") else DECIDED_RANKED
    return Verdict(decision, facts.matches[first], content, reason)


def _first_hit(decision: str) -> Callable[[Facts, Pages], Verdict]:
    def verdict(facts: Facts, pages: Pages) -> Verdict:
        assert facts.first is not None  # the rule applies to hits only
        return Verdict(decision, facts.matches[facts.first], facts.content)
    return verdict


DECISION_RULES: tuple[DecisionRule, ...] = (
    # a sentence that mentions keywords, or a page's title: both tiers' evidence, weighed
    DecisionRule("weigh the evidence", (DECIDED_MENTION_AGREE, DECIDED_MENTION_L0, DECIDED_TITLE,
                                        DECIDED_MENTION_L1, DECIDED_TITLE_L1),
                 lambda f: f.weigh and bool(f.l1_sources or f.titled), _weighed),
    # generic keywords say what kind of page it is, not which: L1 picks among their pages
    DecisionRule("L1 picks among generic hits", (DECIDED_GENERIC, DECIDED_GENERIC_MISS),
                 lambda f: f.first is not None and f.generic and not f.l1_failed, _l1_among_generic),
    DecisionRule("index order", (DECIDED_SUBSTRING,),
                 lambda f: f.first is not None and f.pages > 1 and not f.words, _ranked),
    DecisionRule("the rarest keyword", (DECIDED_TIE, DECIDED_RANKED),
                 lambda f: f.first is not None and f.pages > 1, _ranked),
    DecisionRule("the one page", (DECIDED_UNIQUE,),
                 lambda f: f.first is not None and not f.generic, _first_hit(DECIDED_UNIQUE)),
    # one page on a generic keyword and no L1 to pick (it failed): its rank stands, unsure
    DecisionRule("a generic hit without L1", (DECIDED_RANKED,),
                 lambda f: f.first is not None, _first_hit(DECIDED_RANKED)),
    DecisionRule("no hit", (DECIDED_MISS,), lambda f: True, lambda f, pages: Verdict(DECIDED_MISS)),
)


# -- the rules' work ----------------------------------------------------------------------------------------
def weigh_evidence(facts: Facts, pages: Pages) -> tuple[L0Match | None, str | None, str, bool]:
    """A query that only mentions keywords: each candidate page scores L1's rank of it plus its L0 evidence
    (how much of the query its keywords cover, how few pages claim them). Returns the winning L0 hit with
    its content, or `None` when an L1-only page wins (L1 leads), the reason, and whether both tiers agree
    (the one page L0 names is L1's best)."""
    scores, l1_rank = _l1_scores(facts.l1_sources, pages)
    candidates = _add_l0_evidence(facts, pages, scores)
    title_pages = {page_key(pages, e.file_path): e for e in facts.titled}
    for key, entry in title_pages.items():
        scores[key] = scores.get(key, 0.0) + TITLE_EVIDENCE_WEIGHT / len(title_pages)
        if key not in candidates:  # a page named by its title alone: a match without keywords
            candidates[key] = L0Match(entry, ())
    # best score first; a tie goes to L1's order, then to L0's
    l0_rank = {key: i for i, key in enumerate(candidates)}
    unranked = len(facts.l1_sources)
    order = sorted(scores, key=lambda k: (-scores[k], l1_rank.get(k, unranked), l0_rank.get(k, 0)))
    for key in order:
        match = candidates.get(key)
        if match is None:
            return None, None, (f"L1 ranks that page first (score {scores[key]:.2f}); the keywords the "
                                "query mentions weigh less"), False
        text = pages.excerpt(match.entry.file_path, PRIMARY_MAX_CHARS, clean=True)
        if text is None:
            facts.stale.append(match.entry.file_path)
            continue
        agree = facts.unique and bool(match.keywords) and l1_rank.get(key) == 0
        where = f"L1 rank {l1_rank[key] + 1}" if key in l1_rank else "not among L1's hits"
        why = [f"“{match.rarest_keyword}” covers {match.coverage:.0%} of the query (claimed by "
               f"{n_documents(match.claimed_by)})"] if match.keywords else []
        if key in title_pages:
            why.append("its title is the query")
        return match, text, f"{'; '.join(why)}; {where}: score {scores[key]:.2f}", agree
    return None, None, "", False


def _l1_scores(sources: Sequence[str], pages: Pages) -> tuple[dict[str, float], dict[str, int]]:
    """Each page L1 ranks: 1 / (rank + 1) for its best passage, and that rank (0-based)."""
    scores: dict[str, float] = {}
    l1_rank: dict[str, int] = {}
    for rank, source in enumerate(sources):
        key = page_key(pages, source)
        if key not in l1_rank:
            l1_rank[key] = rank
            scores[key] = 1.0 / (rank + 1)
    return scores, l1_rank


def _add_l0_evidence(facts: Facts, pages: Pages, scores: dict[str, float]) -> dict[str, L0Match]:
    """Adds each hit's L0 evidence to its page's score; returns the hits, one per page, in L0's order."""
    matches = facts.matches
    candidates: dict[str, L0Match] = {}
    for match in matches[:TRACE_MATCHES]:
        path = match.entry.file_path
        if path in facts.stale:
            continue
        key = page_key(pages, path)
        if key in candidates:
            continue
        candidates[key] = match
        share = match.coverage
        if match.via_synonym or any(_is_identifier(k) for k in match.contained_in_query):
            # a code-like name (`key-auth`) or a curator's synonym is rarely said in passing
            share = min(1.0, 3 * share)
        evidence = L0_EVIDENCE_WEIGHT * max(0.0, share - L0_EVIDENCE_FLOOR) / max(1, match.claimed_by)
        if matches.is_generic(match.claimed_by):
            evidence = 0.0
        scores[key] = scores.get(key, 0.0) + evidence
    return candidates


def l1_pick(facts: Facts, pages: Pages) -> tuple[L0Match | None, str | None]:
    """The L0 hit whose page L1 ranks best, with its content; `(None, None)` when L1 found none of them."""
    for source in facts.l1_sources:
        match = facts.matches.find(source)
        if match is None or match.entry.file_path in facts.stale:
            continue
        text = pages.excerpt(match.entry.file_path, PRIMARY_MAX_CHARS, clean=True)
        if text is None:
            facts.stale.append(match.entry.file_path)
            continue
        return match, text
    return None, None


def break_tie(facts: Facts, pages: Pages) -> tuple[int, str | None, str]:
    """Among the hits ranked equal with the first, prefer the one L1 ranks highest; say why in one line."""
    matches, stale, sources = facts.matches, facts.stale, facts.l1_sources
    first, content = facts.first, facts.content
    assert first is not None  # ties are among hits
    if len(matches) - len(stale) <= 1:
        return first, content, ""
    if facts.matching == "substring":  # the spec as written: the first hit in index order
        return first, content, "first in index order (KB_L0_MATCHING=substring)"
    # Thousands of documents may tie on a generic keyword: count them and look up L1's few hits among
    # them, without building a match object per tied document.
    tied = max(1, matches.tied_count() - sum(1 for p in stale if matches.tied_index(p) is not None))
    chosen = first
    if tied > 1 and sources:
        preferred = next((i for s in sources if s not in stale and (i := matches.tied_index(s)) is not None), None)
        if preferred is not None and preferred != first:
            text = pages.excerpt(matches[preferred].entry.file_path, PRIMARY_MAX_CHARS, clean=True)
            if text is not None:
                chosen, content = preferred, text
    won = matches[chosen]
    if tied > 1:
        how = "L1 ranks it highest" if chosen != first or (sources and any(
            s == won.entry.file_path for s in sources)) else "first in index order"
        return chosen, content, (f"tied with {tied - 1} other document(s) on “{won.rarest_keyword}” "
                                 f"(claimed by {won.claimed_by}); {how}")
    return chosen, content, _rarer_or_longer(matches, chosen, stale)


def _rarer_or_longer(matches: RankedMatches, chosen: int, stale: list[str]) -> str:
    """Why the chosen hit outranks the next readable one: a rarer keyword, or a longer one."""
    won = matches[chosen]
    runner_up = next((matches[i] for i in range(min(len(matches), TRACE_MATCHES + 1))
                      if i != chosen and matches[i].entry.file_path not in stale), None)
    if runner_up is None:
        return ""
    if runner_up.claimed_by != won.claimed_by:
        return (f"“{won.rarest_keyword}” is claimed by {n_documents(won.claimed_by)}; "
                f"“{runner_up.rarest_keyword}” by {runner_up.claimed_by}")
    return (f"“{won.rarest_keyword}” is longer than “{runner_up.rarest_keyword}” "
            f"(each claimed by {n_documents(won.claimed_by)})")


_JOINED_NAME = re.compile(r"[0-9A-Za-z]+(?:[-_.][0-9A-Za-z]+)+")


def _joined_name(query: str) -> bool:
    return bool(_JOINED_NAME.fullmatch(query.strip()))


def _is_identifier(keyword: str) -> bool:
    return identifiers(keyword) == [keyword.casefold()]


def n_documents(n: int) -> str:
    return f"{n} document" if n == 1 else f"{n} documents"

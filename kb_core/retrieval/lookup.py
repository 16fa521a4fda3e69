"""The L0 -> L1 decision and the result shape (the spec's `{found, primary, supplement}`).

Exactly one L0 hit on a specific keyword answers at once with confidence "high" and L1 is not called
(the spec's rule). Zero or several L0 hits call L1 once (`top_k=3, category=None`) and add its best chunk from
another page as the supplement. Among several L0 hits the primary is the best ranked (rarest keyword, then
longer keyword); a tie at the top is broken by L1's order, then by index order. Hits that rest only on
*generic* keywords (claimed by more pages than `KB_L0_GENERIC_DOCS`: "Plugin", the product's name) do not
decide: the one L1 ranks best is the primary (confidence "low"); when L1 ranks none of them, the query is
answered as an L0 miss. An unsure answer (`low`, or led by L1) lists `alternatives`.

The primary's content is the frontmatter block plus the cleaned
body (no licence comments, `<head>` blocks or MDX imports), cut at 2,000 characters; with a `section_title`
that names one of its sections, that section instead (the L0 -> L1 decision does not depend on it).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload, runtime_checkable

import numpy as np

from kb_core.documents.language import DEFAULT_LANGUAGE, query_language
from kb_core.documents.scope import ALL, Scope
from kb_core.keywords.index import KnowledgeEntry, KnowledgeIndex, L0Match, RankedMatches
from kb_core.keywords.matching import L0View, generic_limit
from kb_core.ops.logs import current_request_id, log_context, new_request_id
from kb_core.retrieval.reading import PRIMARY_MAX_CHARS, DocumentReader, Primary
from kb_core.retrieval.scoped_documents import source_admitted
from kb_core.terms import identifiers, normalize_term

log = logging.getLogger(__name__)

L1_TOP_K = 3
TRACE_MATCHES = 20  # the "why" panel lists this many L0 hits and "and N more"


@dataclass(frozen=True)
class L1Hit:
    content: str
    source: str
    score: float
    # Which retrievers found this chunk ("dense", "bm25"), its heading path and id, when the searcher knows.
    retrievers: tuple[str, ...] = ()
    # Each retriever's own score (BM25 score, dense cosine) next to the fused `score`.
    retriever_scores: tuple[tuple[str, float], ...] = ()
    heading: str = ""
    chunk_id: str | None = None
    doc_id: int | None = None


@runtime_checkable
class L1Searcher(Protocol):
    """`doc_ids` is passed only for a scoped lookup (searchers without scopes need not take it)."""

    def search(self, query: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]: ...


@dataclass(frozen=True)
class Supplement:
    content: str
    source: str
    match_type: str = "semantic_L1"
    retrievers: tuple[str, ...] = ()  # which of L1's retrievers found it: "dense", "bm25"

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"content": self.content, "source": self.source, "matchType": self.match_type}
        if self.retrievers:
            payload["retrievers"] = list(self.retrievers)
        return payload


MAX_ALTERNATIVES = 5
MAX_SUGGESTIONS = 3


@dataclass(frozen=True)
class Alternative:
    """Another candidate document of an unsure answer, for the agent to read if the first is not it."""

    source: str
    title: str
    lang: str
    why: str  # the keyword that matched, or L1's rank and retrievers

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "title": self.title, "lang": self.lang, "why": self.why}


@runtime_checkable
class Suggestion(Protocol):
    """"Did you mean": an index keyword close to an identifier of the query, and its document."""

    keyword: str
    source: str
    title: str


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
L1_EVIDENCE_TOP_K = 10  # L1's hits asked for when evidence is weighed (the answer still shows its best)


@dataclass(frozen=True)
class LookupTrace:
    """Everything about how an answer came about. Not part of the agent JSON (`to_dict`)."""

    request_id: str
    query: str
    section_title: str | None
    l0_matches: tuple[L0Match, ...]  # the ranked head (at most TRACE_MATCHES)
    l1_called: bool
    l1_reason: str
    l1_hits: tuple[L1Hit, ...] = ()
    l1_error: str | None = None
    stale_sources: tuple[str, ...] = ()  # L0 entries whose file could not be read
    timings_ms: dict[str, float] = field(default_factory=dict)
    l0_total: int | None = None  # all L0 hits (None: as many as l0_matches)
    primary_reason: str = ""  # one line: why the primary won over the other L0 hits
    decision: str = ""  # one line: which rule decided the answer
    generic_limit: int | None = None  # claimants above which a keyword is generic (None: rule not applied)
    primary_source: str | None = None  # the L0 hit that became the primary (before its language was chosen)

    @property
    def l0_count(self) -> int:
        return len(self.l0_matches) if self.l0_total is None else self.l0_total

    def to_dict(self) -> dict[str, Any]:
        return {
            "requestId": self.request_id,
            "query": self.query,
            "sectionTitle": self.section_title,
            "l0Matches": [
                {"source": m.entry.file_path, "title": m.entry.title, "keywords": list(m.keywords),
                 "rarestKeyword": m.rarest_keyword, "claimedBy": m.claimed_by}
                for m in self.l0_matches
            ],
            "l0Total": self.l0_count,
            "primaryReason": self.primary_reason,
            "decision": self.decision,
            "genericLimit": self.generic_limit,
            "l1Called": self.l1_called,
            "l1Reason": self.l1_reason,
            "l1Hits": [
                {"source": h.source, "score": h.score, "retrievers": list(h.retrievers),
                 "retrieverScores": dict(h.retriever_scores), "heading": h.heading, "chunkId": h.chunk_id}
                for h in self.l1_hits
            ],
            "l1Error": self.l1_error,
            "staleSources": list(self.stale_sources),
            "timingsMs": dict(self.timings_ms),
        }


@dataclass(frozen=True)
class LookupResult:
    found: bool
    primary: Primary | None
    supplement: Supplement | None
    trace: LookupTrace
    note: str | None = None  # why a `section_title` was not served ("no section 'X'; available: …")
    alternatives: tuple[Alternative, ...] = ()  # other candidates of an unsure answer, best first
    suggestions: tuple[Suggestion, ...] = ()  # "did you mean" keywords when L0 had no hit

    def to_dict(self) -> dict[str, Any]:
        """The spec's JSON: `found`, `primary`, `supplement`; `note`, `alternatives` and `suggestions`
        only when there are some."""
        payload: dict[str, Any] = {
            "found": self.found,
            "primary": self.primary.to_dict() if self.primary else None,
            "supplement": self.supplement.to_dict() if self.supplement else None,
        }
        if self.note is not None:
            payload["note"] = self.note
        if self.alternatives:
            payload["alternatives"] = [a.to_dict() for a in self.alternatives]
        if self.suggestions:
            payload["suggestions"] = [{"keyword": s.keyword, "source": s.source, "title": s.title}
                                      for s in self.suggestions]
        return payload

    @property
    def match_types(self) -> tuple[str, ...]:
        return tuple(p.match_type for p in (self.primary, self.supplement) if p is not None)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


class Suggesting(Protocol):
    def suggest(self, query: str, limit: int, lang: str | None = None) -> list[Suggestion]: ...


def page_key(index: KnowledgeIndex, path: str) -> str:
    """A page's language versions share a translation group; a file L0 does not know is its own page."""
    entry = index.get(path)
    return (entry.group or path) if entry is not None else path


class HybridLookup:
    def __init__(self, index: KnowledgeIndex, l1: L1Searcher, *, default_language: str = DEFAULT_LANGUAGE,
                 body_suggester: Suggesting | None = None,
                 scope_ids: Callable[[Scope], Collection[int]] | None = None):
        """`scope_ids`: the ids of the documents a scope admits, which L1 searches within (None: scoped lookups
        search nothing in L1 - a knowledge base without a database)."""
        self._index = index
        self._l1 = l1
        self._scope_ids = scope_ids
        self._body_suggester = body_suggester  # identifiers in the pages' text, after the keywords
        self._default_language = default_language
        self._reader = DocumentReader(index)
        self._readable_pages: dict[Scope, tuple[L0View, int]] = {}  # per caller: the view counted, its pages

    def prepare_suggestions(self) -> None:
        """Build both "did you mean" vocabularies now (they build in the background otherwise)."""
        self._index.warm_suggester()
        if self._body_suggester is not None:
            self._body_suggester.refresh(wait=True)

    def lookup(self, query: str, section_title: str | None = None, scope: Scope | None = None) -> LookupResult:
        """The answer to `query`; its request id is the call's (`log_context`) or a new one, and every record
        logged meanwhile carries it. `scope` (`documents.scope`): only the pages it admits exist for this call -
        in L0 before its unique/several decision, inside L1's search, and in every source the answer names."""
        request_id = current_request_id() or new_request_id()
        with log_context(request_id=request_id):
            return self._lookup(request_id, query, section_title, scope or ALL)

    def _readers_counts(self, matches: RankedMatches, scope: Scope) -> RankedMatches:
        """`matches` as a caller limited to some pages sees them: every "claimed by" count, which keyword of a
        hit is its rarest, and the generic limit count only the pages it may read, since a count is as much a
        leak as a title. The question's category and language do not narrow the counts: those pages exist for
        the caller, and an unlimited caller's counts (and so its answers) stay those of the whole tree."""
        if (scope.audiences is None and not scope.allowed_categories) or not len(matches):
            return matches
        reader = Scope(audiences=scope.audiences, allowed_categories=scope.allowed_categories, rule=scope.rule)
        # one view for the mask and the counts: a write swapping the view meanwhile cannot mix two numberings
        view = self._index.view
        limit = view.generic_limit
        if generic_limit(view.pages, view.generic_docs) != generic_limit(0, view.generic_docs):
            limit = generic_limit(self._pages_readable(view, reader), view.generic_docs)
        readable = self._index.scope_mask(reader, view)
        assert readable is not None  # a reader that is not `everything` always has a mask
        return _ReaderCounts(matches, view, readable, limit)

    def _pages_readable(self, view: L0View, reader: Scope) -> int:
        """How many pages (a page's translations counting once) `reader` may read; counted once per view."""
        kept = self._readable_pages.get(reader)
        if kept is not None and kept[0] is view:
            return kept[1]
        decided: dict[tuple[Any, ...], bool] = {}
        pages = set()
        for entry in view.live_entries():
            key = (entry.category, entry.audience)
            ok = decided.get(key)
            if ok is None:
                ok = decided[key] = reader.may_read(entry.category, entry.audience)
            if ok:
                pages.add(entry.group or "\x00" + entry.file_path)
        if len(self._readable_pages) >= 64:
            self._readable_pages.clear()
        self._readable_pages[reader] = (view, len(pages))
        return len(pages)

    def _lookup(self, request_id: str, query: str, section_title: str | None, scope: Scope) -> LookupResult:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        language = query_language(query, self._default_language) if isinstance(query, str) else self._default_language
        scoped = not scope.everything

        t = time.perf_counter()
        matches = self._readers_counts(self._index.match(query, scope), scope)
        total = len(matches)
        timings["l0"] = _ms(t)
        log.debug("[%s] L0 matched %d document(s)", request_id, total)

        t = time.perf_counter()
        stale: list[str] = []
        # A matched entry whose file has gone (deleted by hand) cannot answer; it is reported, not served.
        first, primary_content = self._first_readable(matches, 0, stale)
        # a page's language versions are one answer: "exactly one hit" counts pages, not files
        remaining = matches.group_count(frozenset(stale)) if first is not None else 0
        # Ranking puts the rarest keyword first: when even the first hit's rarest keyword is generic, every hit
        # rests on generic keywords alone.
        words = self._index.matching == "words"
        generic = words and first is not None and matches.is_generic(matches[first].claimed_by)
        timings["read"] = _ms(t)

        # A sentence that merely mentions keywords: every hit's keywords cover a small part of it. A query that
        # is a page's title (and no keyword as a whole) is weighed too: titles are curated names.
        mention = words and first is not None and not generic and isinstance(query, str) and (max(
            m.coverage for m in matches[:TRACE_MATCHES]) < KEYWORD_QUERY_SHARE
            # one joined name (`tidb-server`, `User-Agent`) that a keyword is only a part of (`server`): the
            # name is another thing than the keyword, however much of it the keyword covers
            or (_joined_name(query) and not any(m.exact for m in matches[:TRACE_MATCHES])))
        titled = [e for e in self._index.titled(query, scope) if e.file_path not in stale] if words else []
        # an exact keyword answers as the spec says, unless another page is titled exactly so: then the two
        # curated names disagree, and the evidence decides (confidence low unless L1 agrees)
        weigh = mention or bool(titled) and not (first is not None and matches[first].exact and all(
            page_key(self._index, e.file_path) == page_key(self._index, matches[first].entry.file_path)
            for e in titled))
        l1_hits: list[L1Hit] = []
        l1_error: str | None = None
        if remaining == 1 and not generic and not weigh:
            l1_called, reason = False, L1_SKIPPED_UNIQUE
        elif not (isinstance(query, str) and query.strip()):
            l1_called, reason = False, L1_SKIPPED_BLANK
        else:
            l1_called = True
            reason = L1_CALLED_MENTION if mention else L1_CALLED_TITLE if weigh else \
                L1_CALLED_GENERIC if generic else L1_CALLED_SEVERAL if remaining else L1_CALLED_NONE
            t = time.perf_counter()
            try:
                # a scope is searched within (the documents it admits), so a narrowed question still gets top-k
                within = {} if not scoped else {"doc_ids": self._scope_ids(scope) if self._scope_ids else ()}
                # weighing evidence needs L1's view of more pages than the three the answer shows
                l1_hits = list(self._l1.search(query, top_k=L1_EVIDENCE_TOP_K if weigh else L1_TOP_K,
                                               category=None, **within))
                if scoped:  # the id set may be a moment old: every passage's page is checked against L0 now
                    l1_hits = [h for h in l1_hits if source_admitted(self._index, scope, h.source)]
            except Exception as exc:  # noqa: BLE001 - L1 failing must still return what L0 found
                l1_error = f"{type(exc).__name__}: {exc}"
                log.error("[%s] L1 search failed, answering with L0 only: %s", request_id, l1_error)
            timings["l1"] = _ms(t)
        log.debug("[%s] %s", request_id, reason)

        chosen: L0Match | None = None
        primary_reason = ""
        agree = False
        if weigh and (l1_hits or titled):
            chosen, primary_content, primary_reason, agree = self._weigh(
                matches, l1_hits, stale, remaining == 1 and not generic, titled)
            decision = DECIDED_MENTION_L1 if chosen is None else DECIDED_MENTION_AGREE if agree else \
                DECIDED_TITLE if not chosen.keywords else DECIDED_MENTION_L0
            if not mention and chosen is None:
                decision = DECIDED_TITLE_L1
        elif first is not None:
            chosen = matches[first]
            if generic and l1_error is None:
                chosen, primary_content = self._l1_pick(matches, l1_hits, stale)
                decision = DECIDED_GENERIC if chosen is not None else DECIDED_GENERIC_MISS
                if chosen is not None:
                    primary_reason = (f"only generic keywords matched (“{chosen.rarest_keyword}” is claimed by "
                                      f"{chosen.claimed_by} pages); L1 ranks this page highest among them")
            elif remaining > 1:
                first, primary_content, primary_reason = self._break_tie(matches, first, primary_content, l1_hits,
                                                                         stale)
                chosen = matches[first]
                decision = DECIDED_SUBSTRING if not words else \
                    DECIDED_TIE if primary_reason.startswith("tied") else DECIDED_RANKED
            else:
                decision = DECIDED_UNIQUE if not generic else DECIDED_RANKED
        else:
            decision = DECIDED_MISS

        primary = None
        note = None
        if chosen is not None:
            entry = chosen.entry
            versions = self._index.versions(entry.file_path, scope)
            if len(versions) > 1:
                entry, primary_content = self._in_language(entry, primary_content, versions, language)
            updated, version = self._reader.freshness(entry)
            primary = Primary(
                content=primary_content or "",
                source=entry.file_path,
                confidence="high" if (agree or remaining == 1 and not generic and not weigh) else "low",
                available_sections=entry.sections,
                translations=tuple((v.file_path, v.lang) for v in versions if v.file_path != entry.file_path),
                updated=updated,
                version=version,
            )
            if isinstance(section_title, str) and section_title.strip():
                t = time.perf_counter()
                primary, note = self._serve_section(primary, entry, section_title.strip())
                timings["section"] = _ms(t)
        elif isinstance(section_title, str) and section_title.strip():
            note = (f"section_title '{section_title.strip()}' was not applied: no document matched the query's "
                    "keywords, and L1 passages are not split by section")
        supplement = None
        if l1_hits:
            best = self._supplement(l1_hits, primary, language, scope)
            if best is not None:
                supplement = Supplement(content=best.content, source=best.source, retrievers=best.retrievers)
        if primary is None and supplement is None and decision == DECIDED_MISS:
            decision = DECIDED_NOTHING
        alternatives: tuple[Alternative, ...] = ()
        if (primary is not None and primary.confidence == "low") or (primary is None and supplement is not None):
            alternatives = self._alternatives(matches, l1_hits, primary, supplement, stale, language, scope)

        suggestions: tuple[Suggestion, ...] = ()
        if (primary is None or primary.confidence == "low") and isinstance(query, str) and query.strip():
            # no keyword named one page for sure: an identifier a typing slip away from one may have meant it
            t = time.perf_counter()
            suggestions = tuple(self._index.suggest(query, limit=MAX_SUGGESTIONS, lang=language))
            if len(suggestions) < MAX_SUGGESTIONS and self._body_suggester is not None:
                named = {page_key(self._index, s.source) for s in suggestions}
                for more in self._body_suggester.suggest(query, MAX_SUGGESTIONS, language):
                    if len(suggestions) < MAX_SUGGESTIONS and page_key(self._index, more.source) not in named:
                        named.add(page_key(self._index, more.source))
                        suggestions += (more,)
            if scoped:  # a typo's page outside the scope does not exist for this call either
                suggestions = tuple(s for s in suggestions if source_admitted(self._index, scope, s.source))
            timings["suggest"] = _ms(t)
        if scoped and note is None and primary is None and supplement is None and not self._index.in_scope(scope):
            note = f"no document is in this call's scope ({scope.describe() or 'what this caller may read'})"

        head = [m for m in matches[:TRACE_MATCHES] if m.entry.file_path not in stale]
        if chosen is not None:
            head = [chosen, *(m for m in head if m.entry.file_path != chosen.entry.file_path)][:TRACE_MATCHES]
        timings["total"] = _ms(started)
        trace = LookupTrace(
            request_id=request_id,
            query=query,
            section_title=section_title,
            l0_matches=tuple(head),
            l1_called=l1_called,
            l1_reason=reason,
            l1_hits=tuple(l1_hits),
            l1_error=l1_error,
            stale_sources=tuple(stale),
            timings_ms=timings,
            l0_total=total - len(stale),
            primary_reason=primary_reason,
            decision=decision,
            generic_limit=matches.generic_limit if words else None,
            primary_source=chosen.entry.file_path if chosen is not None else None,
        )
        result = LookupResult(found=primary is not None or supplement is not None,
                              primary=primary, supplement=supplement, trace=trace, note=note,
                              alternatives=alternatives, suggestions=suggestions)
        log.info("[%s] lookup %r: found=%s l0=%d l1=%s in %.1f ms", request_id, query, result.found,
                 remaining, "called" if l1_called else "skipped", timings["total"],
                 extra={"request_id": request_id, "timings_ms": timings})
        return result

    def _serve_section(self, primary: Primary, entry: KnowledgeEntry, title: str) -> tuple[Primary, str | None]:
        """The primary with `content` = the named section (cut like any answer), or unchanged and a note."""
        return self._reader.serve_section(primary, entry, title)

    def _supplement(self, hits: list[L1Hit], primary: Primary | None, language: str,
                    scope: Scope = ALL) -> L1Hit | None:
        """L1's best passage from another page than the primary's (its translations are the same page), in the
        query's language when L1 found that page in several; when L1 found only the primary's page, its best
        passage that `primary.content` does not already show (else none: it would add nothing)."""
        taken = {primary.source, *(source for source, _ in primary.translations)} if primary is not None else set()
        others = [h for h in hits if h.source not in taken]
        if not others:
            shown = _collapsed(primary.content) if primary is not None else ""
            return next((h for h in hits if not _shows(shown, h.content)), None)
        best = others[0]
        entry = self._index.get(best.source)
        if entry is not None and entry.lang != language:
            in_language = {v.file_path for v in self._index.versions(best.source, scope) if v.lang == language}
            best = next((h for h in others if h.source in in_language), best)
        return best

    def _weigh(self, matches: RankedMatches, l1_hits: list[L1Hit], stale: list[str],
               unique: bool, titled: list[KnowledgeEntry]) -> tuple[L0Match | None, str | None, str, bool]:
        """A query that only mentions keywords: each candidate page scores L1's rank of it plus its L0 evidence
        (how much of the query its keywords cover, how few pages claim them). Returns the winning L0 hit with
        its content, or `None` when an L1-only page wins (L1 leads), the reason, and whether both tiers agree
        (the one page L0 names is L1's best)."""
        scores: dict[str, float] = {}  # page -> score
        l1_rank: dict[str, int] = {}

        def page(path: str) -> str:
            return page_key(self._index, path)

        for rank, hit in enumerate(l1_hits):
            key = page(hit.source)
            if key not in l1_rank:
                l1_rank[key] = rank
                scores[key] = 1.0 / (rank + 1)
        candidates: dict[str, L0Match] = {}
        for match in matches[:TRACE_MATCHES]:
            path = match.entry.file_path
            if path in stale:
                continue
            key = page(path)
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
        title_pages = {page(e.file_path): e for e in titled}
        for key, entry in title_pages.items():
            scores[key] = scores.get(key, 0.0) + TITLE_EVIDENCE_WEIGHT / len(title_pages)
            if key not in candidates:  # a page named by its title alone: a match without keywords
                candidates[key] = L0Match(entry, ())
        # best score first; a tie goes to L1's order, then to L0's
        l0_rank = {key: i for i, key in enumerate(candidates)}
        order = sorted(scores, key=lambda k: (-scores[k], l1_rank.get(k, len(l1_hits)), l0_rank.get(k, 0)))
        for key in order:
            match = candidates.get(key)
            if match is None:
                return None, None, (f"L1 ranks that page first (score {scores[key]:.2f}); the keywords the "
                                    "query mentions weigh less"), False
            text = self._index.excerpt(match.entry.file_path, PRIMARY_MAX_CHARS, clean=True)
            if text is None:
                stale.append(match.entry.file_path)
                continue
            agree = unique and bool(match.keywords) and l1_rank.get(key) == 0
            where = f"L1 rank {l1_rank[key] + 1}" if key in l1_rank else "not among L1's hits"
            why = [f"“{match.rarest_keyword}” covers {match.coverage:.0%} of the query (claimed by "
                   f"{_documents(match.claimed_by)})"] if match.keywords else []
            if key in title_pages:
                why.append("its title is the query")
            return match, text, f"{'; '.join(why)}; {where}: score {scores[key]:.2f}", agree
        return None, None, "", False

    def _l1_pick(self, matches: RankedMatches, l1_hits: list[L1Hit],
                 stale: list[str]) -> tuple[L0Match | None, str | None]:
        """The L0 hit whose page L1 ranks best, with its content; `(None, None)` when L1 found none of them."""
        for hit in l1_hits:
            match = matches.find(hit.source)
            if match is None or match.entry.file_path in stale:
                continue
            text = self._index.excerpt(match.entry.file_path, PRIMARY_MAX_CHARS, clean=True)
            if text is None:
                stale.append(match.entry.file_path)
                continue
            return match, text
        return None, None

    def _alternatives(self, matches: RankedMatches, l1_hits: list[L1Hit], primary: Primary | None,
                      supplement: Supplement | None, stale: list[str], language: str,
                      scope: Scope = ALL) -> tuple[Alternative, ...]:
        """Up to five other candidate pages, best first: pages both tiers found, then pages a specific keyword
        matched, then L1's other pages, then pages only a generic keyword matched. One entry per page, in
        the query's language when the page has that version."""
        taken: set[str] = set()
        for source in (primary.source if primary else None, supplement.source if supplement else None):
            if source is not None:
                taken.update(v.file_path for v in self._index.versions(source) or ())
                taken.add(source)
        ranked: list[tuple[int, int, str, str]] = []  # (class, order, file_path, why)
        in_l0: set[str] = set()
        for order, hit in enumerate(l1_hits):
            retrievers = "+".join(hit.retrievers) or "L1"
            match = matches.find(hit.source)
            if match is not None:
                in_l0.add(match.entry.file_path)
                ranked.append((0, order, hit.source, f"L1 rank {order + 1} ({retrievers}) and keyword "
                                                     f"“{match.rarest_keyword}”"))
            else:
                ranked.append((2, order, hit.source, f"L1 rank {order + 1} ({retrievers}, score {hit.score:g})"))
        for order, match in enumerate(matches[:TRACE_MATCHES]):
            path = match.entry.file_path
            if path in in_l0 or path in stale:
                continue
            generic = matches.is_generic(match.claimed_by)
            ranked.append((3 if generic else 1, order, path,
                           f"keyword “{match.rarest_keyword}” ({'generic, ' if generic else ''}claimed by "
                           f"{_documents(match.claimed_by)})"))
        found: list[Alternative] = []
        for _cls, _order, path, why in sorted(ranked, key=lambda r: (r[0], r[1])):
            if path in taken:
                continue
            versions = self._index.versions(path, scope)
            taken.update(v.file_path for v in versions)
            taken.add(path)
            entry = next((v for v in versions if v.lang == language), None) or self._index.get(path)
            if entry is None:  # an L1 hit without an L0 entry (no frontmatter)
                found.append(Alternative(path, "", "und", why))
            else:
                found.append(Alternative(entry.file_path, entry.title, entry.lang, why))
            if len(found) >= MAX_ALTERNATIVES:
                break
        return tuple(found)

    def _in_language(self, entry: KnowledgeEntry, content: str | None, versions: tuple[KnowledgeEntry, ...],
                     language: str) -> tuple[KnowledgeEntry, str | None]:
        """The version of the page in the query's language (when there is one and it can be read)."""
        if entry.lang == language:
            return entry, content
        for version in versions:
            if version.lang == language:
                text = self._index.excerpt(version.file_path, PRIMARY_MAX_CHARS, clean=True)
                if text is not None:
                    return version, text
        return entry, content

    def _first_readable(self, matches: RankedMatches, start: int, stale: list[str]) -> tuple[int | None, str | None]:
        for i in range(start, len(matches)):
            path = matches[i].entry.file_path
            if path in stale:
                continue
            content = self._index.excerpt(path, PRIMARY_MAX_CHARS, clean=True)
            if content is not None:
                return i, content
            stale.append(path)
        return None, None

    def _break_tie(self, matches: RankedMatches, first: int, content: str | None, l1_hits: list[L1Hit],
                   stale: list[str]) -> tuple[int, str | None, str]:
        """Among the hits ranked equal with the first, prefer the one L1 ranks highest; say why in one line."""
        if len(matches) - len(stale) <= 1:
            return first, content, ""
        if self._index.matching == "substring":  # the spec as written: the first hit in index order
            return first, content, "first in index order (KB_L0_MATCHING=substring)"
        # Thousands of documents may tie on a generic keyword: count them and look up L1's few hits among
        # them, without building a match object per tied document.
        tied = max(1, matches.tied_count() - sum(1 for p in stale if matches.tied_index(p) is not None))
        chosen = first
        if tied > 1 and l1_hits:
            preferred = next((i for h in l1_hits if h.source not in stale
                              and (i := matches.tied_index(h.source)) is not None), None)
            if preferred is not None and preferred != first:
                text = self._index.excerpt(matches[preferred].entry.file_path, PRIMARY_MAX_CHARS, clean=True)
                if text is not None:
                    chosen, content = preferred, text
        won = matches[chosen]
        if tied > 1:
            how = "L1 ranks it highest" if chosen != first or (l1_hits and any(
                h.source == won.entry.file_path for h in l1_hits)) else "first in index order"
            return chosen, content, (f"tied with {tied - 1} other document(s) on “{won.rarest_keyword}” "
                                     f"(claimed by {won.claimed_by}); {how}")
        runner_up = next((matches[i] for i in range(min(len(matches), TRACE_MATCHES + 1))
                          if i != chosen and matches[i].entry.file_path not in stale), None)
        if runner_up is None:
            return chosen, content, ""
        if runner_up.claimed_by != won.claimed_by:
            return chosen, content, (f"“{won.rarest_keyword}” is claimed by {_documents(won.claimed_by)}; "
                                     f"“{runner_up.rarest_keyword}” by {runner_up.claimed_by}")
        return chosen, content, (f"“{won.rarest_keyword}” is longer than “{runner_up.rarest_keyword}” "
                                 f"(each claimed by {_documents(won.claimed_by)})")


class _ReaderCounts(Sequence[L0Match]):
    """`RankedMatches` whose counts are those of the pages one caller may read (`HybridLookup._readers_counts`):
    each hit's rarest keyword chosen again as `RankedMatches` chooses it, by those counts; the rank order and
    everything else are `RankedMatches`' own."""

    def __init__(self, matches: RankedMatches, view: L0View, readable: np.ndarray, limit: int):
        self._matches, self._view, self._readable = matches, view, readable
        self._limit = limit
        self._claims: dict[str, int] = {}
        self._recounted: dict[str, L0Match] = {}

    @property
    def generic_limit(self) -> int:
        return self._limit

    def is_generic(self, claimants: int) -> bool:
        return claimants > self._limit

    def claimed_by(self, term: str) -> int:
        """Readable pages whose keywords include the normalised `term`."""
        count = self._claims.get(term)
        if count is None:
            view = self._view
            term_id = view.term_id.get(term)
            positions = np.zeros(0, dtype=np.int32) if term_id is None else np.asarray(view.postings[term_id])
            positions = positions[self._readable[positions]]
            if len(positions) > 1 and view.group_members:
                count = len(set(view.group_of[positions].tolist()))
            else:
                count = len(positions)
            self._claims[term] = count
        return count

    def _recount(self, match: L0Match) -> L0Match:
        done = self._recounted.get(match.entry.file_path)
        if done is not None:
            return done
        if match.exact or not match.keywords:  # the keyword the query equals is the one shown, as in ranking
            rarest = match.rarest_keyword
            count = self.claimed_by(normalize_term(rarest)) if rarest else match.claimed_by
        else:
            rarest, count = "", 0
            for keyword in match.keywords:
                term = normalize_term(keyword)
                claimants = self.claimed_by(term)
                if not rarest or (claimants, -len(term)) < (count, -len(normalize_term(rarest))):
                    rarest, count = keyword, claimants
        done = self._recounted[match.entry.file_path] = dataclasses.replace(
            match, rarest_keyword=rarest, claimed_by=count)
        return done

    def find(self, file_path: str) -> L0Match | None:
        match = self._matches.find(file_path)
        return None if match is None else self._recount(match)

    def __len__(self) -> int:
        return len(self._matches)

    @overload
    def __getitem__(self, index: int) -> L0Match: ...

    @overload
    def __getitem__(self, index: slice) -> list[L0Match]: ...

    def __getitem__(self, index: int | slice) -> L0Match | list[L0Match]:
        if isinstance(index, slice):
            return [self._recount(m) for m in self._matches[index]]
        return self._recount(self._matches[index])

    def __getattr__(self, name: str) -> Any:  # tied_count, group_count, ...: counts of what this caller matched
        return getattr(self._matches, name)


_JOINED_NAME = re.compile(r"[0-9A-Za-z]+(?:[-_.][0-9A-Za-z]+)+")


def _joined_name(query: str) -> bool:
    return bool(_JOINED_NAME.fullmatch(query.strip()))


def _is_identifier(keyword: str) -> bool:
    return identifiers(keyword) == [keyword.casefold()]


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _shows(shown: str, passage: str) -> bool:
    """Whether `shown` (collapsed) already contains `passage`: its first line of text after a heading."""
    lines = [line for line in passage.strip().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    probe = _collapsed(" ".join(lines))[:80]
    return bool(shown) and (not probe or probe in shown)


def _documents(n: int) -> str:
    return f"{n} document" if n == 1 else f"{n} documents"

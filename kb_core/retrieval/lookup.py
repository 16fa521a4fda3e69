"""The L0 -> L1 decision and the result shape (the spec's `{found, primary, supplement}`).

Exactly one L0 hit on a specific keyword answers at once with confidence "high" and L1 is not called
(the spec's rule). Zero or several L0 hits call L1 once (`top_k=3, category=None`) and add its best chunk from
another page as the supplement. Among several L0 hits the primary is the best ranked (rarest keyword, then
longer keyword); a tie at the top is broken by L1's order, then by index order. Hits that rest only on
*generic* keywords (claimed by more pages than `KB_L0_GENERIC_DOCS`: "Plugin", the product's name) do not
decide: the one L1 ranks best is the primary (confidence "low"); when L1 ranks none of them, the query is
answered as an L0 miss. An unsure answer (`low`, or led by L1) lists `alternatives`. Which rule decides is
`decision.py`: two short ordered lists of named rules; `HybridLookup` runs the steps around them.

The primary's content is the frontmatter block plus the cleaned
body (no licence comments, `<head>` blocks or MDX imports), cut at 2,000 characters; with a `section_title`
that names one of its sections, that section instead (the L0 -> L1 decision does not depend on it).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, overload, runtime_checkable

import numpy as np

from kb_core.documents.language import DEFAULT_LANGUAGE, query_language
from kb_core.documents.scope import ALL, Scope
from kb_core.keywords.index import KnowledgeEntry, KnowledgeIndex, L0Match, RankedMatches
from kb_core.keywords.matching import L0View, generic_limit
from kb_core.ops.logs import current_request_id, log_context, new_request_id
from kb_core.retrieval.decision import (
    TRACE_MATCHES,
    Facts,
    L1Rule,
    Verdict,
    confidence,
    decide,
    l1_rule,
    n_documents,
    page_key,
    read_hits,
    settled,
    with_titles,
)
from kb_core.retrieval.reading import PRIMARY_MAX_CHARS, DocumentReader, Primary
from kb_core.retrieval.scoped_documents import source_admitted
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

L1_TOP_K = 3
L1_EVIDENCE_TOP_K = 10  # L1's hits asked for when evidence is weighed (the answer still shows its best)


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


class _Clock:
    """A lookup's timings, step by step (the "why" panel's caption, the log line's `timings_ms`)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Times the body as `name`; a body that raises records nothing."""
        t = time.perf_counter()
        yield
        self.timings[name] = _ms(t)



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
        """The steps: L0 match -> does L0 answer alone (`l1_rule`) -> L1 -> the rule that decides (`decide`) ->
        the primary -> the supplement -> alternatives and suggestions -> the trace."""
        clock = _Clock()
        language = query_language(query, self._default_language) if isinstance(query, str) else self._default_language
        facts = self._find_in_l0(request_id, query, scope, clock)
        plan = l1_rule(facts)
        l1_hits: list[L1Hit] = []
        l1_error: str | None = None
        if plan.calls:
            # weighing evidence needs L1's view of more pages than the three the answer shows
            with clock.step("l1"):
                l1_hits, l1_error = self._search_l1(request_id, query, scope,
                                                    L1_EVIDENCE_TOP_K if facts.weigh else L1_TOP_K)
        log.debug("[%s] %s", request_id, plan.reason)
        facts = dataclasses.replace(facts, l1_sources=tuple(h.source for h in l1_hits), l1_failed=l1_error is not None)
        verdict = decide(facts, self._index)

        primary, note = self._primary(facts, verdict, section_title, language, scope, clock)
        supplement = self._supplement_of(l1_hits, primary, language, scope)
        found = primary is not None or supplement is not None
        alternatives = self._alternatives(facts.matches, l1_hits, primary, supplement, facts.stale, language, scope)
        suggestions = self._suggestions(query, primary, language, scope, clock)
        if note is None:
            note = self._empty_scope_note(scope, found)

        trace = self._trace(request_id, query, section_title, facts, plan, l1_hits, l1_error, verdict,
                            settled(verdict.decision, found), clock)
        result = LookupResult(found=found, primary=primary, supplement=supplement, trace=trace, note=note,
                              alternatives=alternatives, suggestions=suggestions)
        log.info("[%s] lookup %r: found=%s l0=%d l1=%s in %.1f ms", request_id, query, result.found,
                 facts.pages, "called" if plan.calls else "skipped", clock.timings["total"],
                 extra={"request_id": request_id, "timings_ms": clock.timings})
        return result

    def _find_in_l0(self, request_id: str, query: str, scope: Scope, clock: _Clock) -> Facts:
        """L0's hits for `query` as this caller counts them, and what reading the first of them shows."""
        with clock.step("l0"):
            matches = self._readers_counts(self._index.match(query, scope), scope)
        log.debug("[%s] L0 matched %d document(s)", request_id, len(matches))
        with clock.step("read"):
            facts = read_hits(query, matches, self._index, self._index.matching)
        return with_titles(facts, self._index.titled(query, scope) if facts.words else (), self._index)

    def _search_l1(self, request_id: str, query: str, scope: Scope, top_k: int) -> tuple[list[L1Hit], str | None]:
        """L1's hits, or what it raised: L1 failing must still return what L0 found."""
        hits: list[L1Hit] = []
        scoped = not scope.everything
        try:
            # a scope is searched within (the documents it admits), so a narrowed question still gets top-k
            within = {} if not scoped else {"doc_ids": self._scope_ids(scope) if self._scope_ids else ()}
            hits = list(self._l1.search(query, top_k=top_k, category=None, **within))
            if scoped:  # the id set may be a moment old: every passage's page is checked against L0 now
                hits = [h for h in hits if source_admitted(self._index, scope, h.source)]
        except Exception as exc:  # noqa: BLE001 - L1 failing must still return what L0 found
            error = f"{type(exc).__name__}: {exc}"
            log.error("[%s] L1 search failed, answering with L0 only: %s", request_id, error)
            return hits, error
        return hits, None

    def _primary(self, facts: Facts, verdict: Verdict, section_title: str | None, language: str, scope: Scope,
                 clock: _Clock) -> tuple[Primary | None, str | None]:
        """The chosen hit served in the query's language (or its asked section), and a note on the section."""
        asked = section_title.strip() if isinstance(section_title, str) and section_title.strip() else None
        if verdict.chosen is None:
            return None, None if asked is None else (
                f"section_title '{asked}' was not applied: no document matched the query's keywords, and L1 "
                "passages are not split by section")
        entry, content = verdict.chosen.entry, verdict.content
        versions = self._index.versions(entry.file_path, scope)
        if len(versions) > 1:
            entry, content = self._in_language(entry, content, versions, language)
        updated, version = self._reader.freshness(entry)
        primary = Primary(
            content=content or "",
            source=entry.file_path,
            confidence=confidence(facts, verdict),
            available_sections=entry.sections,
            translations=tuple((v.file_path, v.lang) for v in versions if v.file_path != entry.file_path),
            updated=updated,
            version=version,
        )
        if asked is None:
            return primary, None
        with clock.step("section"):
            return self._serve_section(primary, entry, asked)

    def _suggestions(self, query: str, primary: Primary | None, language: str, scope: Scope,
                     clock: _Clock) -> tuple[Suggestion, ...]:
        """"Did you mean" keywords (then identifiers of the pages' text), when no keyword named one page for
        sure: an identifier a typing slip away from one may have meant it."""
        if not ((primary is None or primary.confidence == "low") and isinstance(query, str) and query.strip()):
            return ()
        with clock.step("suggest"):
            suggestions = tuple(self._index.suggest(query, limit=MAX_SUGGESTIONS, lang=language))
            if len(suggestions) < MAX_SUGGESTIONS and self._body_suggester is not None:
                named = {page_key(self._index, s.source) for s in suggestions}
                for more in self._body_suggester.suggest(query, MAX_SUGGESTIONS, language):
                    if len(suggestions) < MAX_SUGGESTIONS and page_key(self._index, more.source) not in named:
                        named.add(page_key(self._index, more.source))
                        suggestions += (more,)
            if not scope.everything:  # a typo's page outside the scope does not exist for this call either
                suggestions = tuple(s for s in suggestions if source_admitted(self._index, scope, s.source))
        return suggestions

    def _empty_scope_note(self, scope: Scope, found: bool) -> str | None:
        """Why a scoped call found nothing when its scope admits no document at all."""
        if scope.everything or found or self._index.in_scope(scope):
            return None
        return f"no document is in this call's scope ({scope.describe() or 'what this caller may read'})"

    def _trace(self, request_id: str, query: str, section_title: str | None, facts: Facts, plan: L1Rule,
               l1_hits: list[L1Hit], l1_error: str | None, verdict: Verdict, decision: str,
               clock: _Clock) -> LookupTrace:
        """How the answer came about; its L0 head starts with the hit that became the primary."""
        stale, chosen = facts.stale, verdict.chosen
        head = [m for m in facts.matches[:TRACE_MATCHES] if m.entry.file_path not in stale]
        if chosen is not None:
            head = [chosen, *(m for m in head if m.entry.file_path != chosen.entry.file_path)][:TRACE_MATCHES]
        clock.timings["total"] = _ms(clock.started)
        return LookupTrace(
            request_id=request_id,
            query=query,
            section_title=section_title,
            l0_matches=tuple(head),
            l1_called=plan.calls,
            l1_reason=plan.reason,
            l1_hits=tuple(l1_hits),
            l1_error=l1_error,
            stale_sources=tuple(stale),
            timings_ms=clock.timings,
            l0_total=len(facts.matches) - len(stale),
            primary_reason=verdict.reason,
            decision=decision,
            generic_limit=facts.matches.generic_limit if facts.words else None,
            primary_source=chosen.entry.file_path if chosen is not None else None,
        )

    def _serve_section(self, primary: Primary, entry: KnowledgeEntry, title: str) -> tuple[Primary, str | None]:
        """The primary with `content` = the named section (cut like any answer), or unchanged and a note."""
        return self._reader.serve_section(primary, entry, title)

    def _supplement_of(self, hits: list[L1Hit], primary: Primary | None, language: str,
                       scope: Scope) -> Supplement | None:
        if not hits:
            return None
        best = self._supplement(hits, primary, language, scope)
        return None if best is None else Supplement(content=best.content, source=best.source,
                                                    retrievers=best.retrievers)

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

    def _alternatives(self, matches: RankedMatches, l1_hits: list[L1Hit], primary: Primary | None,
                      supplement: Supplement | None, stale: list[str], language: str,
                      scope: Scope = ALL) -> tuple[Alternative, ...]:
        """Up to five other candidate pages, best first: pages both tiers found, then pages a specific keyword
        matched, then L1's other pages, then pages only a generic keyword matched. One entry per page, in
        the query's language when the page has that version. None when the answer is sure."""
        if not (primary is not None and primary.confidence == "low" or primary is None and supplement is not None):
            return ()
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
                           f"{n_documents(match.claimed_by)})"))
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


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _shows(shown: str, passage: str) -> bool:
    """Whether `shown` (collapsed) already contains `passage`: its first line of text after a heading."""
    lines = [line for line in passage.strip().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    probe = _collapsed(" ".join(lines))[:80]
    return bool(shown) and (not probe or probe in shown)

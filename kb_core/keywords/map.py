"""The keyword map: which keywords make L0 ambiguous, predicted by running L0 itself.

For every keyword the map asks the live L0 snapshot what a query of just that keyword returns
(`Snapshot.match`, the very function lookups use), so a prediction cannot drift from the rule:

- an *identical* keyword claimed by several documents (a clash): every query naming it gets several hits;
- an *overlap*: under the `words` rule a keyword that lies word-aligned inside a longer one (`APISIX` in
  `Apache APISIX`) is matched by a query of just the shorter keyword (the query is contained in both), so
  "APISIX" alone hits both documents. A query that names the longer keyword hits only its documents: the
  longest occurrence in the query wins and hides the shorter one. The longer keyword is therefore only
  *shadowing* the shorter (harmless); the shorter one is ambiguous. (Under the `substring` rule both count
  and both directions are ambiguous: the same code finds that, because it asks the rule.)
- weak keywords (too short, digits or punctuation only, stop words, beyond the 64th), which L0 ignores.

A keyword is ambiguous exactly when its bare query returns more than one document, which is when a lookup
answers with confidence "low". The map is computed once per L0 snapshot (snapshots are immutable) and
cached: about 15 µs per distinct keyword.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from kb_core.keywords.matching import GENERIC_MIN_LIMIT, Snapshot
from kb_core.terms import normalize_term

MAX_LISTED = 8  # keywords named in one row's explanation


@dataclass(frozen=True)
class KeywordRow:
    """One keyword of the map (as first spelled) and what L0 makes of it."""

    keyword: str
    file_paths: tuple[str, ...]  # the documents whose frontmatter claims it
    hits: int  # pages L0 returns for a query of just this keyword (0: L0 ignores it); translations count once
    overlaps: tuple[str, ...] = ()  # other keywords that query also matches, bringing other documents
    shadows: tuple[str, ...] = ()  # keywords inside this one that a query naming it does not count
    weak: str | None = None  # why L0 ignores it, if it does
    pages: int | None = None  # the pages claiming it (a page's language versions count once); None: as files
    generic_limit: int = GENERIC_MIN_LIMIT  # more claimants than this: generic (the lookup's own rule)

    @property
    def claimants(self) -> int:
        return len(self.file_paths) if self.pages is None else self.pages

    @property
    def ambiguous(self) -> bool:
        return self.weak is None and self.hits > 1

    @property
    def clash(self) -> bool:
        return self.weak is None and self.claimants > 1

    @property
    def generic(self) -> bool:
        return self.weak is None and self.claimants > self.generic_limit

    @property
    def problem(self) -> bool:
        return self.ambiguous or self.weak is not None

    @property
    def kind(self) -> str:
        """One word for the table: weak, generic, clash, overlap, shadows (harmless) or ok."""
        if self.weak is not None:
            return "weak"
        if self.generic:
            return "generic"
        if self.clash:
            return "clash"
        if self.ambiguous:
            return "overlap"
        return "shadows" if self.shadows else "ok"

    def explain(self) -> str:
        """Why, in one line the curator can act on."""
        if self.weak is not None:
            return f"ignored by L0: {self.weak}"
        parts = []
        if self.clash:
            files = len(self.file_paths)
            parts.append(f"claimed by {self.claimants} pages ({files} documents: a page's translations count once)"
                         if self.claimants != files else f"claimed by {files} documents")
        if self.overlaps:
            parts.append("inside " + _names(self.overlaps) + " of other documents")
        if self.ambiguous:
            parts.append(f"a query of just “{self.keyword}” gets {self.hits} hits (confidence low)")
        if self.shadows:
            parts.append("hides " + _names(self.shadows) + " when named in a query (harmless: the longer "
                         "keyword wins)")
        return "; ".join(parts) or "unique"


def _names(keywords: tuple[str, ...]) -> str:
    shown = ", ".join(f"“{k}”" for k in keywords[:MAX_LISTED])
    return shown + (f" and {len(keywords) - MAX_LISTED} more" if len(keywords) > MAX_LISTED else "")


@dataclass(frozen=True)
class KeywordMap:
    rows: tuple[KeywordRow, ...]  # problems first: generic (most claimed first), clashes, overlaps, weak; then ok
    documents: int  # documents in L0
    generic_limit: int = GENERIC_MIN_LIMIT  # a keyword claimed by more pages is generic (`KB_L0_GENERIC_DOCS`)

    @property
    def problems(self) -> tuple[KeywordRow, ...]:
        return tuple(r for r in self.rows if r.problem)

    @property
    def ambiguous(self) -> tuple[KeywordRow, ...]:
        return tuple(r for r in self.rows if r.ambiguous)

    @property
    def clashes(self) -> tuple[KeywordRow, ...]:
        return tuple(r for r in self.rows if r.clash)

    @property
    def overlaps(self) -> tuple[KeywordRow, ...]:
        """Ambiguous only because a longer keyword of another document contains it."""
        return tuple(r for r in self.rows if r.ambiguous and not r.clash)

    @property
    def generic(self) -> tuple[KeywordRow, ...]:
        return tuple(sorted((r for r in self.rows if r.generic), key=lambda r: -len(r.file_paths)))

    @property
    def weak(self) -> tuple[KeywordRow, ...]:
        return tuple(r for r in self.rows if r.weak is not None)

    def row(self, keyword: str) -> KeywordRow | None:
        term = normalize_term(keyword)
        return next((r for r in self.rows if normalize_term(r.keyword) == term and r.weak is None),
                    next((r for r in self.rows if normalize_term(r.keyword) == term), None))

    def __iter__(self) -> Iterator[KeywordRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class KeywordHit:
    """A document a query of the keyword returns, and its keywords that matched."""

    file_path: str
    title: str
    matched_by: tuple[str, ...]
    claims: bool  # the document claims the keyword itself (not only a longer one containing it)


_cache: WeakKeyDictionary[Snapshot, dict[bytes, KeywordMap]] = WeakKeyDictionary()
_cache_lock = threading.Lock()


def keyword_map(snapshot: Snapshot, allowed: np.ndarray | None = None) -> KeywordMap:
    """The map of one L0 snapshot (cached while the snapshot lives); `allowed`: the positions a reader limited to
    some audiences may see (a scope's mask), so every row, count and overlap is of those pages alone."""
    key = b"" if allowed is None else np.packbits(allowed).tobytes()
    with _cache_lock:
        cached = _cache.get(snapshot, {}).get(key)
    if cached is None:
        cached = _build(snapshot, allowed)
        with _cache_lock:
            kept = _cache.setdefault(snapshot, {})
            if len(kept) >= 16:  # one per scope in use: a handful
                kept.clear()
            kept[key] = cached
    return cached


def _build(snapshot: Snapshot, allowed: np.ndarray | None = None) -> KeywordMap:
    entries = snapshot.entries
    shown = range(len(entries)) if allowed is None else np.flatnonzero(allowed).tolist()
    spelled: dict[str, str] = {}  # term -> its first spelling
    seen: set[str] = set()  # spellings already normalised: generic keywords repeat in thousands of documents
    for pos in shown:
        for keyword in entries[pos].keywords:
            if keyword not in seen:
                seen.add(keyword)
                spelled.setdefault(normalize_term(keyword), keyword)
    terms = snapshot.terms
    claimants: dict[str, frozenset[int]] = {}

    def claimants_of(term: str) -> frozenset[int]:
        found = claimants.get(term)
        if found is None:
            positions = snapshot.postings[snapshot.term_id[term]].tolist()
            found = claimants[term] = frozenset(positions if allowed is None else (p for p in positions if allowed[p]))
        return found

    # a limited reader's map holds the keywords of its pages only, counted over its pages
    listed = range(len(terms)) if allowed is None else [i for i, t in enumerate(terms) if claimants_of(t)]
    # Only a keyword that contains another one, or lies inside another one (as plain text, whatever the rule),
    # can match more than its own documents: one Aho-Corasick pass over every keyword finds them, and L0's
    # matcher is asked about those alone (at 10,000 documents most keywords are neither).
    overlapping: set[int] = set()
    if snapshot.automaton is not None:
        for term in terms:
            inside = {j for _end, j in snapshot.automaton.iter(term)}
            if len(inside) > 1:
                overlapping.update(inside)
    for ids in snapshot.alias_terms:  # a synonym group's keywords match each other's queries: ask L0
        overlapping.update(ids)
    matched: dict[str, tuple[str, ...]] = {}  # term -> the other terms its bare query counts
    pages = {terms[i]: snapshot.df[i] if allowed is None else
             len({snapshot.group_of[p] for p in claimants_of(terms[i])}) for i in listed}
    hits: dict[str, int] = dict(pages)
    for i in sorted(overlapping.intersection(listed)):
        term = terms[i]
        found = snapshot.match(term, allowed)
        hits[term] = found.group_count()
        if len(found) > len(claimants_of(term)):
            matched[term] = tuple(t for t in found.matched_terms if t != term)
    shadows: dict[str, list[str]] = {}
    for term, others in matched.items():
        for other in others:
            if term not in matched.get(other, ()):
                shadows.setdefault(other, []).append(term)
    rows = []
    for i in listed:
        term = terms[i]
        others = matched.get(term, ())
        overlaps = tuple(spelled.get(t, t) for t in others if not claimants_of(t) <= claimants_of(term)) \
            if others else ()
        paths = tuple(entries[p].file_path for p in snapshot.postings[i].tolist() if allowed is None or allowed[p])
        rows.append(KeywordRow(spelled.get(term, term), paths, hits[term], overlaps,
                               tuple(spelled.get(t, t) for t in shadows.get(term, ())), pages=pages[term],
                               generic_limit=snapshot.generic_limit))
    weak: dict[str, tuple[str, str, list[str]]] = {}
    for pos in shown:
        entry = entries[pos]
        for keyword, reason in entry.ignored_keywords:
            _, _, paths = weak.setdefault(normalize_term(keyword), (keyword, reason, []))
            if entry.file_path not in paths:
                paths.append(entry.file_path)
    rows += [KeywordRow(keyword, tuple(paths), 0, weak=reason) for keyword, reason, paths in weak.values()]
    order = {"generic": 0, "clash": 1, "overlap": 2, "weak": 3, "shadows": 4, "ok": 5}
    rows.sort(key=lambda r: (order[r.kind], -len(r.file_paths), -r.hits, normalize_term(r.keyword)))
    return KeywordMap(tuple(rows), len(shown), snapshot.generic_limit)


def keyword_hits(snapshot: Snapshot, keyword: str, limit: int = 200,
                 allowed: np.ndarray | None = None) -> list[KeywordHit]:
    """The documents a query of just `keyword` returns, in L0's rank order (at most `limit`); `allowed`: the
    positions a limited reader may see."""
    term = normalize_term(keyword)
    claimed = set(snapshot.claimed_by(term))
    found = snapshot.match(term, allowed)
    result = []
    for match in found[:limit]:
        position = snapshot.position[match.entry.file_path]
        result.append(KeywordHit(match.entry.file_path, match.entry.title, match.keywords, position in claimed))
    if not result:  # a weak keyword: L0 ignores it, list the documents that carry it
        for pos, entry in enumerate(snapshot.entries):
            if (allowed is None or allowed[pos]) and any(normalize_term(k) == term for k, _ in entry.ignored_keywords):
                result.append(KeywordHit(entry.file_path, entry.title, (), True))
                if len(result) >= limit:
                    break
    return result

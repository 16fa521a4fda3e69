"""L0 matching: an immutable snapshot of every document's keywords, and the ranked hits of one query.

Two rules, chosen per index (`KB_L0_MATCHING`):

- `words` (default). A keyword matches when it occurs in the query or the query occurs in it (the spec's two
  directions), and the occurrence is word-aligned wherever its edge is a Latin letter, digit or underscore:
  `AI` matches "AI gateway", not "explain"; `ERR_TIMEOUT` matches "查询ERR_TIMEOUT的含义", not
  "ERR_TIMEOUT_4071"; Chinese keeps plain containment ("支付网关超时问题" contains `超时`). An occurrence in
  the query that lies inside the occurrence of a longer matched keyword does not count ("AI Security"
  hides the `AI` inside it). Several hits are ranked: the document whose rarest counting keyword is claimed
  by the fewest documents first, then the longer keyword, then index order (the lookup breaks remaining
  ties with L1).
- `substring`: the spec's literal rule (plain containment both ways, every keyword counts, hits in
  index order). Kept so the difference stays measurable.

Nothing here loops over documents in Python: keywords are de-duplicated into terms with integer posting
lists (numpy arrays); "query contains keyword" is one Aho-Corasick pass over the query, "keyword contains
query" a dict lookup of the query's word run (or one search of all terms joined by NUL). A query that hits
thousands of documents costs a few vectorised operations for the total and the first rank group, and only
the ranked head is turned into `L0Match` objects, when someone reads it. No per-hit Python object is made:
big young lists and sets would also make every garbage collection that runs meanwhile walk them.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any, overload

import ahocorasick
import numpy as np

from kb_core.terms import WORD_CHARS, aligned, contains_aligned, content_mask, normalize_term

if TYPE_CHECKING:
    from kb_core.keywords.entry import KnowledgeEntry
    from kb_core.keywords.suggestions import Suggester

MATCHING_MODES = ("words", "substring")
GENERIC_MIN_LIMIT = 5  # a keyword is generic when more pages than max(this, 1 % of pages) claim it


def generic_limit(pages: int, configured: int | None = None) -> int:
    """Claimants a keyword may have before it is *generic* (`KB_L0_GENERIC_DOCS`; default the larger of 5
    and 1 % of the pages): it says what kind of page this is ("Plugin" on a third of them), not which one, so
    it does not decide an answer on its own."""
    if configured is not None:
        return max(1, configured)
    return max(GENERIC_MIN_LIMIT, -(-pages // 100))
_WORD_RUN = re.compile(f"[{WORD_CHARS}]+")
_SEPARATOR = "\x00"  # normalize_term() removes NUL, so it never occurs inside a keyword or a query


@dataclass(frozen=True)
class L0Match:
    """One matched document and the keywords that matched it (the console highlights them)."""

    entry: KnowledgeEntry
    keywords: tuple[str, ...]
    # the keywords the query contains; the others contain the query (the spec's two directions)
    contained_in_query: tuple[str, ...] = ()
    # the rarest of the matched keywords and how many documents claim it (the ranking's first key)
    rarest_keyword: str = ""
    claimed_by: int = 0
    # (keyword, the synonym the query used instead): keywords matched only through a curator's synonym group
    via_synonym: tuple[tuple[str, str], ...] = ()
    # the share of the query's content (letters and digits, less filler words) that these keywords cover; 1.0
    # when a keyword contains the whole query. Low: the query only mentions the keyword (a sentence).
    coverage: float = 1.0
    exact: bool = False  # one of the keywords equals the whole query

    def explain(self) -> list[str]:
        via = dict(self.via_synonym)
        return [(f"query {'contains' if k in self.contained_in_query else 'is inside'} “{via[k]}”, "
                 f"via synonym of “{k}”") if k in via else
                f"query contains “{k}”" if k in self.contained_in_query else f"“{k}” contains the query"
                for k in self.keywords]


class L0View:
    """What every view of the index answers the same way: a `Snapshot`, or a `delta.DeltaSnapshot`
    over one. Both offer `entries` and `normalized_keywords` by position, `position` by path, `terms`,
    `term_id`, `postings` and `df` by term, `group_of`, `group_members`, `size`, `count`, `pages` and
    `generic_limit`, the synonym tables, and the hooks below."""

    matching: str
    generic_limit: int
    has_terms: bool
    term_id: Any
    postings: Any
    synonym_automaton: ahocorasick.Automaton | None
    aliases: tuple[str, ...]
    alias_terms: tuple[tuple[int, ...], ...]

    def match(self, query: str, allowed: np.ndarray | None = None) -> RankedMatches:
        return match_query(self, query, allowed)

    def scope_mask(self, admits: Callable[[KnowledgeEntry], bool]) -> np.ndarray:
        """Which positions `admits` (a scope's test): one call per distinct (category, language, audience),
        not per entry - entries share those values."""
        decided: dict[tuple[Any, ...], bool] = {}
        mask = np.zeros(self.size, dtype=bool)
        entries = self.entries
        for pos in range(self.size):
            entry = entries[pos]
            key = (entry.category, entry.lang, entry.audience)
            ok = decided.get(key)
            if ok is None:
                ok = decided[key] = admits(entry)
            mask[pos] = ok
        return mask

    def is_generic(self, claimants: int) -> bool:
        return claimants > self.generic_limit

    def claimed_by(self, keyword: str) -> list[int]:
        """Positions of the documents whose keywords include `keyword` (normalised), in index order."""
        term_id = self.term_id.get(normalize_term(keyword))
        return [] if term_id is None else self.postings[term_id].tolist()

    def spans_in(self, query: str, words: bool) -> list[tuple[int, int, int]]:
        """(start, stop, term id) of every keyword inside the normalised query (word-aligned in `words` mode)."""
        raise NotImplementedError

    def terms_containing(self, query: str, words: bool) -> set[int]:
        """Term ids of the keywords that contain the normalised query."""
        raise NotImplementedError


class Snapshot(L0View):
    """An immutable view of the index: entries, their normalised keywords and the search structures."""

    def __init__(self, entries: tuple[KnowledgeEntry, ...], matching: str = "words",
                 normalized_cache: dict[str, str] | None = None, generic_docs: int | None = None,
                 synonyms: tuple[tuple[str, ...], ...] = ()):
        if matching not in MATCHING_MODES:
            raise ValueError(f"matching must be one of {MATCHING_MODES}, not {matching!r}")
        self.entries = entries
        self.size = self.count = len(entries)  # positions (a delta's may have gaps) and documents
        self.matching = matching
        self.position = {entry.file_path: i for i, entry in enumerate(entries)}
        # Term ids in order of first claimant. The posting lists are grouped out of two flat arrays (term id,
        # position) rather than collected in a list per term: 100,000 documents would make 150,000 young lists
        # that survive into the oldest generation and make the garbage collector walk the whole heap (a pause
        # of a few hundred ms for every thread) while the snapshot is built.
        term_id: dict[str, int] = {}
        claims: list[int] = []  # term id of each (document, keyword), in position order
        claimants: list[int] = []  # ... and its position
        counts_per_entry: list[int] = []
        cache = normalized_cache if normalized_cache is not None else {}
        for pos, entry in enumerate(entries):
            own = entry_terms(entry, cache)
            for term in own:
                claims.append(term_id.setdefault(term, len(term_id)))
            claimants += [pos] * len(own)
            counts_per_entry.append(len(own))
        self.terms: tuple[str, ...] = tuple(term_id)
        self.term_id = term_id
        by_term = np.array(claims, dtype=np.int32)
        # an entry's normalised keywords: its run of `claims` (term ids), not a tuple of strings per entry
        self.normalized_keywords = Ragged(self.terms, by_term, _starts(counts_per_entry))
        order = np.argsort(by_term, kind="stable")  # by term, positions ascending within each
        sorted_terms, sorted_positions = by_term[order], np.array(claimants, dtype=np.int32)[order]
        self.postings = Postings(sorted_positions, _starts(np.bincount(sorted_terms, minlength=len(term_id))))
        # Translation groups: the language versions of one page count as one claimant. `group_of[pos]` is a
        # group id (a document without translations is a group of its own); `df[term]` counts groups.
        group_ids: dict[str, int] = {}
        group_of = np.empty(len(entries), dtype=np.int32)
        members: dict[int, list[int]] = {}
        for pos, entry in enumerate(entries):
            if entry.group:
                gid = group_of[pos] = group_ids.setdefault(entry.group, len(group_ids))
                members.setdefault(gid, []).append(pos)
            else:
                group_of[pos] = group_ids[f"\x00{pos}"] = len(group_ids)
        self.group_of = group_of
        self.pages = len(group_ids)
        self.group_ids = {key: gid for key, gid in group_ids.items() if key[0] != "\x00"}  # keyed groups only
        self.generic_docs = generic_docs
        self.generic_limit = generic_limit(self.pages, generic_docs)
        self.group_members = {gid: tuple(ps) for gid, ps in members.items() if len(ps) > 1}
        # df: pages per term, a page's translations counting once (distinct (term, group) pairs)
        if self.group_members and len(sorted_terms):
            pairs = np.unique(sorted_terms.astype(np.int64) * self.pages + group_of[sorted_positions])
            counts = np.bincount(pairs // self.pages, minlength=len(term_id))
        else:
            counts = np.bincount(sorted_terms, minlength=len(term_id))
        self.df: tuple[int, ...] = tuple(counts.tolist())
        self.search = TermSearch(self.terms)
        self.automaton = self.search.automaton
        self.has_terms = self.automaton is not None
        # From here on the terms are spelled out of the search's joined text and found by the automaton's exact
        # lookup: a string and a dict entry per term would be ~20 MB at 100,000 documents.
        self._spell_terms()
        self.synonyms = synonyms
        self.aliases, self.alias_terms, self.synonym_automaton = synonym_tables(synonyms, self.term_id)
        self._suggester: Suggester | None = None
        self._titles: dict[str, list[str]] | None = None

    # -- what a delta over this snapshot shares with it (`delta.DeltaSnapshot`) ---------------------
    @property
    def delta_size(self) -> int:
        """Changes applied since the last full build: none, for a snapshot built in full."""
        return 0

    def consolidated(self) -> Snapshot:
        """This view built in full: the snapshot itself."""
        return self

    def live_entries(self) -> tuple[KnowledgeEntry, ...]:
        """Every entry, in index order."""
        return self.entries

    def term_order(self, term_id: int) -> int:
        """Where a term stands in the order of first claimants (a term id here; a delta computes it)."""
        return term_id

    def spans_in(self, query: str, words: bool) -> list[tuple[int, int, int]]:
        return self.search.spans(query, words)

    def terms_containing(self, query: str, words: bool) -> set[int]:
        return self.search.containing(query, words)

    def titled(self, query: str) -> tuple[str, ...]:
        """Paths of the documents whose title equals the normalised `query` ("" finds none), in index order.
        The table is built on first use, like the suggester (or comes with a saved snapshot: `set_titles`)."""
        if self._titles is None:
            self.set_titles([normalize_term(entry.title) for entry in self.entries])
        assert self._titles is not None
        return tuple(self._titles.get(query, ()))

    @property
    def has_titles(self) -> bool:
        """Whether the exact-title table is there already (built, or read with a saved snapshot)."""
        return self._titles is not None

    def set_titles(self, normalized: Sequence[str]) -> None:
        """The exact-title table from each entry's normalised title, in entry order ("" for none)."""
        if len(normalized) != len(self.entries):
            raise ValueError("titles of other entries")
        titles: dict[str, list[str]] = {}
        for entry, title in zip(self.entries, normalized, strict=True):
            if title:
                titles.setdefault(title, []).append(entry.file_path)
        self._titles = titles

    def suggester(self) -> Suggester:
        """"Did you mean" over this snapshot's identifier keywords (`kb_core.keywords.suggestions`), built on
        first use: most snapshots never need it. Two threads racing here build it twice, harmlessly."""
        if self._suggester is None:
            from kb_core.keywords.suggestions import Suggester

            self._suggester = Suggester(self)
        return self._suggester

    @property
    def has_suggester(self) -> bool:
        """Whether `suggester()` has been built (the index then builds the next snapshot's eagerly)."""
        return self._suggester is not None

    # What the saved L0 snapshot holds (snapshot_file): not what is derived from the entries in a few ms
    # (the dicts by path, group key and term: pickled, their keys would be copies of the entries' strings).
    _DERIVED = ("position", "group_ids", "term_id", "terms", "_suggester", "_titles")

    def _spell_terms(self) -> None:
        search = self.search
        self.terms = search.terms = self.normalized_keywords.terms = JoinedTerms(search.joined, search.offsets)
        self.term_id = TermIds(self.automaton, self.terms)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in self._DERIVED}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        entries = self.entries
        self._spell_terms()
        self.position = {entry.file_path: i for i, entry in enumerate(entries)}
        group_ids: dict[str, int] = {}
        for entry, gid in zip(entries, self.group_of.tolist(), strict=True):
            if entry.group:
                group_ids.setdefault(entry.group, gid)
        self.group_ids = group_ids
        self._suggester = None
        self._titles = None


class JoinedTerms(Sequence[str]):
    """Term id -> term, spelled out of the NUL-joined terms (`TermSearch.joined`) on access."""

    __slots__ = ("joined", "offsets")

    def __init__(self, joined: str, offsets: array):
        self.joined, self.offsets = joined, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        offsets = self.offsets
        return self.joined[offsets[i]:offsets[i + 1] - 1]

    def __iter__(self) -> Iterator[str]:
        return iter(self.joined.split(_SEPARATOR)) if len(self) else iter(())


_MISSING = object()


class TermIds(Mapping[str, int]):
    """Term -> term id, through the automaton's exact lookup (it holds every term already)."""

    __slots__ = ("_automaton", "_terms")

    def __init__(self, automaton: ahocorasick.Automaton | None, terms: Sequence[str]):
        self._automaton, self._terms = automaton, terms

    def get(self, term: object, default: Any = None) -> Any:
        if self._automaton is None or type(term) is not str or not term:
            return default
        return self._automaton.get(term, default)

    def __getitem__(self, term: str) -> int:
        found = self.get(term, _MISSING)
        if found is _MISSING:
            raise KeyError(term)
        return found

    def __contains__(self, term: object) -> bool:
        return self.get(term, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return len(self._terms)

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)


class _Runs(Sequence[Any]):
    """Runs of one flat array cut at `starts` (run i is `flat[starts[i]:starts[i + 1]]`): one array for all of
    them, where an array or a tuple per run would be ~100 bytes of object each (tens of MB at 100,000
    documents). Subclasses say what a run is read as."""

    __slots__ = ("flat", "starts")

    def __init__(self, flat: np.ndarray, starts: array):
        self.flat, self.starts = flat, starts

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        starts = self.starts
        return self._read(self.flat[starts[i]:starts[i + 1]])

    def _read(self, run: np.ndarray) -> Any:
        return run


class Postings(_Runs):
    """Positions by term id; an item is a view of the flat array, not a copy."""

    __slots__ = ()


class Ragged(_Runs):
    """Each entry's normalised keywords by position: its run of term ids, spelled on access."""

    __slots__ = ("terms",)

    def __init__(self, terms: Sequence[str], flat: np.ndarray, starts: array):
        super().__init__(flat, starts)
        self.terms = terms

    def _read(self, run: np.ndarray) -> tuple[str, ...]:
        terms = self.terms
        return tuple(terms[t] for t in run.tolist())


def _starts(counts: Sequence[int] | np.ndarray) -> array:
    """Where each run begins in a flat array, and its end: 0, c0, c0 + c1, ... (machine integers: indexing
    gives Python ints fast, 8 bytes each)."""
    out = array("q", [0])
    out.frombytes(np.cumsum(np.asarray(counts, dtype=np.int64)).astype(np.int64).tobytes())
    return out


def _split(values: np.ndarray, sorted_keys: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """`values` cut where `sorted_keys` (0 .. n - 1, ascending, each present) changes: one array per key."""
    if n == 0:
        return ()
    return tuple(np.split(values, np.searchsorted(sorted_keys, np.arange(1, n))))


def build_automaton(terms: Iterable[str]) -> ahocorasick.Automaton:
    """An Aho-Corasick automaton over the terms, each found with its index as the value."""
    automaton = ahocorasick.Automaton()
    for i, term in enumerate(terms):
        automaton.add_word(term, i)
    automaton.make_automaton()
    return automaton


class TermSearch:
    """The search structures over a tuple of terms (term id = index): an Aho-Corasick automaton for "the query
    contains a term" and, for "a term contains the query", the terms joined by NUL plus a dict of their word
    runs. A snapshot has one over all its terms; a delta one over the terms its base does not have."""

    def __init__(self, terms: Sequence[str]):
        self.terms = terms
        self.automaton = build_automaton(terms) if terms else None
        self.joined = _SEPARATOR.join(terms)
        self.offsets = _starts([len(term) + 1 for term in terms])  # where each term starts in `joined`
        self.longest = max((len(t) for t in terms), default=0)
        # Every maximal run of word characters in a term -> the terms holding it: a query that is one such run
        # ("ai", "err_timeout", "plugin") is found inside keywords with one dict lookup, word-aligned by
        # construction, instead of a scan over every keyword. Most runs are in one term: the value is then that
        # term id, otherwise a tuple of them; a run that is a whole term and in no other one is not kept at all
        # (the automaton's exact lookup finds it: most identifiers are such runs).
        # (Grouped out of flat lists, not collected in a list per run: see `Snapshot`.)
        run_id: dict[str, int] = {}
        run_of: list[int] = []
        term_of: list[int] = []
        for i, term in enumerate(terms):
            found = _WORD_RUN.findall(term)
            for run in (found if len(found) < 2 else dict.fromkeys(found)):
                run_of.append(run_id.setdefault(run, len(run_id)))
                term_of.append(i)
        keys = np.array(run_of, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        ids = _split(np.array(term_of, dtype=np.int64)[order], keys[order], len(run_id))
        self.word_runs: dict[str, int | tuple[int, ...]] = {
            run: int(part[0]) if len(part) == 1 else tuple(part.tolist())
            for run, part in zip(run_id, ids, strict=True) if len(part) > 1 or terms[int(part[0])] != run}

    def spans(self, query: str, words: bool) -> list[tuple[int, int, int]]:
        spans: list[tuple[int, int, int]] = []
        if self.automaton is None:
            return spans
        terms = self.terms
        for end, term_id in self.automaton.iter(query):
            start = end + 1 - len(terms[term_id])
            if not words or aligned(query, start, end + 1):
                spans.append((start, end + 1, term_id))
        return spans

    def containing(self, query: str, words: bool) -> set[int]:
        """Terms (keywords) that contain the query, word-aligned at its Latin edges in `words` mode."""
        if len(query) > self.longest:
            return set()
        if words and _WORD_RUN.fullmatch(query):
            found_ids = self.word_runs.get(query)
            if found_ids is None:  # in no term, or only in the term it is
                own = self.automaton.get(query, None) if self.automaton is not None else None
                return set() if own is None else {own}
            return {found_ids} if isinstance(found_ids, int) else set(found_ids)
        found: set[int] = set()
        joined, offsets, terms = self.joined, self.offsets, self.terms
        start = 0
        while (at := joined.find(query, start)) != -1:
            term_id = bisect.bisect_right(offsets, at) - 1
            local = at - offsets[term_id]
            if not words or aligned(terms[term_id], local, local + len(query)):
                found.add(term_id)
                # the rest of this term cannot add anything new: jump to the next one
                start = offsets[term_id] + len(terms[term_id]) + 1
            else:
                start = at + 1
        return found


def entry_terms(entry: KnowledgeEntry, cache: dict[str, str]) -> tuple[str, ...]:
    """An entry's normalised keywords, each once, in its own order (empty ones dropped)."""
    own: list[str] = []
    for keyword in entry.keywords:
        term = cache.get(keyword)
        if term is None:
            term = cache[keyword] = normalize_term(keyword)
        if term and term not in own:
            own.append(term)
    return tuple(own)


def synonym_spellings(groups: tuple[tuple[str, ...], ...]) -> frozenset[str]:
    """Every normalised word of the synonym groups (a delta rebuilds its tables when one of them changes)."""
    return frozenset(t for group in groups for t in (normalize_term(w) for w in group) if t)


def synonym_tables(groups: tuple[tuple[str, ...], ...], term_id: Mapping[str, int]) -> tuple[
        tuple[str, ...], tuple[tuple[int, ...], ...], ahocorasick.Automaton | None]:
    """Curator synonym groups: every spelling of a group stands for the group's keywords. Returns the aliases
    (normalised spellings), for each the term ids of the group's members that are keywords here (`term_id`),
    and an automaton over the aliases."""
    aliases: dict[str, set[int]] = {}
    for group in groups:
        spellings = list(dict.fromkeys(t for t in (normalize_term(w) for w in group) if t))
        members = {term_id[t] for t in spellings if t in term_id}
        if not members:
            continue
        for spelling in spellings:
            aliases.setdefault(spelling, set()).update(members)
    automaton = None
    if aliases:
        automaton = ahocorasick.Automaton()
        for i, alias in enumerate(aliases):
            automaton.add_word(alias, i)
        automaton.make_automaton()
    return tuple(aliases), tuple(tuple(sorted(ids)) for ids in aliases.values()), automaton


def match_query(view: L0View, query: str, allowed: np.ndarray | None = None) -> RankedMatches:
    """The ranked hits of `query` on a view: a `Snapshot`, or a `delta.DeltaSnapshot` over one (both
    give the same spans, synonyms and terms for the same entries; only their term ids may differ). `allowed`:
    only these positions count (a scope's mask, `scope_mask`), before anything is ranked or counted."""
    term = normalize_term(query) if isinstance(query, str) else ""
    if not term or not view.has_terms:
        return RankedMatches(view, frozenset(), frozenset())
    words = view.matching == "words"
    spans = view.spans_in(term, words)  # (start, stop, term id) of keywords inside the query
    if view.synonym_automaton is not None:  # a synonym in the query: alias i is the id -(i + 1)
        for end, alias in view.synonym_automaton.iter(term):
            start = end + 1 - len(view.aliases[alias])
            if not words or aligned(term, start, end + 1):
                spans.append((start, end + 1, -alias - 1))
    if words and len(spans) > 1:
        spans = _longest_spans(spans)
    direct = {term_id for _, _, term_id in spans if term_id >= 0}
    via: dict[int, str] = {}
    for _, _, span_id in spans:
        if span_id < 0:
            for term_id in view.alias_terms[-span_id - 1]:
                if term_id not in direct:
                    via.setdefault(term_id, view.aliases[-span_id - 1])
    inside = frozenset(direct | set(via))
    spans_of: dict[int, list[tuple[int, int]]] = {}
    for start, stop, span_id in spans:
        for term_id in (span_id,) if span_id >= 0 else view.alias_terms[-span_id - 1]:
            spans_of.setdefault(term_id, []).append((start, stop))
    containing = view.terms_containing(term, words)
    for i, alias in enumerate(view.aliases):  # the query inside a synonym (the spec's other direction)
        if len(term) < len(alias) and term in alias and (not words or contains_aligned(alias, term)):
            for term_id in view.alias_terms[i]:
                if term_id not in inside and term_id not in containing:
                    via.setdefault(term_id, alias)
                    containing.add(term_id)
    exact = view.term_id.get(term) if words else None
    return RankedMatches(view, frozenset(inside | containing), inside, via,
                         coverage=_Coverage(content_mask(term), spans_of) if words else None,
                         exact=exact if exact is not None and exact >= 0 else None, allowed=allowed)


@dataclass(frozen=True)
class _Coverage:
    """The query's content characters and where each keyword sits in it, for `L0Match.coverage`."""

    mask: list[bool]
    spans_of: dict[int, list[tuple[int, int]]]

    def share(self, term_ids: Iterable[int]) -> float:
        total = sum(self.mask)
        if not total:
            return 1.0
        covered = [False] * len(self.mask)
        for term_id in term_ids:
            for start, stop in self.spans_of.get(term_id, ()):
                covered[start:stop] = [True] * (stop - start)
        return sum(1 for c, m in zip(covered, self.mask, strict=True) if c and m) / total


def _longest_spans(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop every span that lies inside a longer one ("AI" inside "AI Security" at the same place)."""
    kept: list[tuple[int, int, int]] = []
    reach = -1  # the furthest stop of any span that starts at or before the current one
    for start, stop, term_id in sorted(spans, key=lambda s: (s[0], -s[1])):
        if stop <= reach and not (kept and kept[-1][:2] == (start, stop)):  # the same words: a keyword and
            continue  # its synonym spelling both stand
        kept.append((start, stop, term_id))
        reach = stop
    return kept


class RankedMatches(Sequence[L0Match]):
    """The hits of one query, ranked; a lazy sequence of `L0Match`.

    `len()` is the number of matched documents; items are built only for the positions read, so a query that
    hits 4,000 documents costs the head it shows.
    """

    def __init__(self, snapshot: Any, counting: frozenset[int], inside: frozenset[int],
                 via: dict[int, str] | None = None, *, coverage: _Coverage | None = None,
                 exact: int | None = None, allowed: np.ndarray | None = None):
        self._snapshot = snapshot
        self._coverage = coverage
        self._exact = exact if exact in counting else None
        self._counting = counting
        self._inside = inside
        self._via = via or {}  # term id -> the synonym the query used for it
        self._mask: np.ndarray | None = None  # every matched position, when more than one term counts
        self._allowed = allowed  # the positions in the caller's scope (None: all)
        if not counting:
            self._total = 0
        elif allowed is not None:  # a scope: the positions outside it never match
            matched = np.zeros(snapshot.size, dtype=bool)
            for term_id in counting:
                matched[snapshot.postings[term_id]] = True
            self._mask = matched & allowed
            self._total = int(np.count_nonzero(self._mask))
        elif len(counting) == 1:
            self._total = len(snapshot.postings[next(iter(counting))])
        else:
            self._mask = np.zeros(snapshot.size, dtype=bool)
            for term_id in counting:
                self._mask[snapshot.postings[term_id]] = True
            self._total = int(np.count_nonzero(self._mask))
        self._chunks: list[np.ndarray] = []  # document positions in rank order, one array per rank group
        self._ends: list[int] = []  # cumulative end of each chunk
        self._groups: Iterator[np.ndarray] | None = None
        self._cache: dict[int, L0Match] = {}

    # -- ranking -------------------------------------------------------------------------------------
    def _term_groups(self) -> Iterator[np.ndarray]:
        snapshot = self._snapshot
        if snapshot.matching == "substring":  # the spec as written: index order
            yield self._index_order()
            return
        # A keyword equal to the whole query first ("limit-count" before "graphql-limit-count", which contains
        # it); then rarest first (fewest documents, a page's translations counting once), then the longer
        # keyword; one group per (df, length).
        seen: np.ndarray | None = None
        if self._exact is not None:
            seen = np.zeros(snapshot.size, dtype=bool)
            positions = self._in_scope(snapshot.postings[self._exact])
            seen[positions] = True
            if len(positions):
                yield positions
        # A keyword the query contains outranks one that contains the query (the query is only part of it), and
        # among those the shorter is the closer.
        def rank(t: int) -> tuple[int, int, int]:
            inside = t in self._inside
            return snapshot.df[t], 0 if inside else 1, -len(snapshot.terms[t]) if inside else len(snapshot.terms[t])

        ordered = sorted(self._counting - {self._exact}, key=lambda t: (*rank(t), t))
        for _key, group in groupby(ordered, key=rank):
            term_ids = list(group)
            positions = self._in_scope(snapshot.postings[term_ids[0]] if len(term_ids) == 1 else
                                       np.unique(np.concatenate([snapshot.postings[t] for t in term_ids])))
            if seen is None:
                seen = np.zeros(snapshot.size, dtype=bool)
            else:
                positions = positions[~seen[positions]]
            seen[positions] = True
            if len(positions):
                yield positions

    def _in_scope(self, positions: np.ndarray) -> np.ndarray:
        return positions if self._allowed is None else positions[self._allowed[positions]]

    def _index_order(self) -> np.ndarray:
        if self._mask is not None:
            return np.flatnonzero(self._mask)
        return self._snapshot.postings[next(iter(self._counting))] if self._counting else np.zeros(0, np.int32)

    def _fill(self, count: int) -> None:
        if self._groups is None:
            self._groups = self._term_groups()
        while (self._ends[-1] if self._ends else 0) < count:
            group = next(self._groups, None)
            if group is None:
                break
            self._chunks.append(group)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(group))

    def tied_with_first(self, limit: int = 1000) -> list[int]:
        """Indexes (in this sequence) of the hits that rank equal with the first: L1 may break the tie."""
        if self._total == 0:
            return []
        self._fill(1)
        return list(range(min(self._ends[0], limit)))

    def tied_count(self) -> int:
        """How many hits rank equal with the first (no object is built for them)."""
        if self._total == 0:
            return 0
        self._fill(1)
        return self._ends[0]

    def tied_index(self, file_path: str) -> int | None:
        """The index of `file_path` among the hits tied with the first, or `None` when it is not one of them."""
        position = self._snapshot.position.get(file_path)
        if position is None or self._total == 0:
            return None
        self._fill(1)
        found = np.flatnonzero(self._chunks[0] == position)
        return int(found[0]) if len(found) else None

    @property
    def generic_limit(self) -> int:
        return self._snapshot.generic_limit

    def is_generic(self, claimants: int) -> bool:
        """A keyword claimed by this many pages is generic: it does not decide an answer on its own."""
        return self._snapshot.is_generic(claimants)

    def find(self, file_path: str) -> L0Match | None:
        """The hit for `file_path`, or for another language version of its page; `None` when neither matched."""
        snapshot = self._snapshot
        position = snapshot.position.get(file_path)
        if position is None or self._total == 0:
            return None
        members = snapshot.group_members.get(int(snapshot.group_of[position]), (position,))
        matched = self._index_order()
        for member in sorted(members, key=lambda p: p != position):  # the document itself first
            if self._mask is not None and self._mask[member] or self._mask is None and member in matched:
                return self._build(member)
        return None

    def group_count(self, excluding: frozenset[str] = frozenset()) -> int:
        """How many pages matched: a page's translations count once (documents at `excluding` do not count)."""
        snapshot = self._snapshot
        if not snapshot.group_members and not excluding:
            return self._total
        positions = self._index_order()
        if excluding:
            skip = [snapshot.position[p] for p in excluding if p in snapshot.position]
            positions = positions[~np.isin(positions, skip)]
        if not snapshot.group_members or len(positions) <= 1:
            return len(positions)
        # counting set bins beats np.unique (a sort) tenfold on a generic keyword's thousands of hits
        return int(np.count_nonzero(np.bincount(snapshot.group_of[positions])))

    @property
    def matched_terms(self) -> tuple[str, ...]:
        """The normalised keywords that counted for this query (the keyword map explains overlaps with them)."""
        snapshot = self._snapshot
        return tuple(snapshot.terms[t] for t in sorted(self._counting, key=snapshot.term_order))

    # -- Sequence ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._total

    @overload
    def __getitem__(self, index: int) -> L0Match: ...

    @overload
    def __getitem__(self, index: slice) -> list[L0Match]: ...

    def __getitem__(self, index: int | slice) -> L0Match | list[L0Match]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._total))]
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError(index)
        match = self._cache.get(index)
        if match is None:
            self._fill(index + 1)
            chunk = bisect.bisect_right(self._ends, index)
            start = self._ends[chunk - 1] if chunk else 0
            match = self._cache[index] = self._build(int(self._chunks[chunk][index - start]))
        return match

    def __iter__(self) -> Iterator[L0Match]:
        for i in range(self._total):
            yield self[i]

    def positions_in_index_order(self) -> list[int]:
        """Every matched document's position, in index order (what `exact_match` returns)."""
        return self._index_order().tolist()

    def _build(self, pos: int) -> L0Match:
        snapshot = self._snapshot
        entry = snapshot.entries[pos]
        keywords: list[str] = []
        inside: list[str] = []
        rarest, rarest_df = "", 0
        exact_keyword, exact_df = "", 0
        normalized = snapshot.normalized_keywords[pos]
        spelled = {normalize_term(k): k for k in reversed(entry.keywords)}  # first spelling wins
        for term in normalized:
            term_id = snapshot.term_id[term]
            if term_id not in self._counting:
                continue
            keyword = spelled.get(term, term)
            keywords.append(keyword)
            if term_id in self._inside:
                inside.append(keyword)
            df = snapshot.df[term_id]
            if not rarest or (df, -len(term)) < (rarest_df, -len(normalize_term(rarest))):
                rarest, rarest_df = keyword, df
            if term_id == self._exact:  # the keyword the query equals is what ranked this hit: it is shown
                exact_keyword, exact_df = keyword, df
        if exact_keyword:
            rarest, rarest_df = exact_keyword, exact_df
        via = tuple((keyword, self._via[snapshot.term_id[normalize_term(keyword)]]) for keyword in keywords
                    if snapshot.term_id.get(normalize_term(keyword)) in self._via)
        matched = [snapshot.term_id[term] for term in normalized if snapshot.term_id[term] in self._counting]
        coverage = 1.0
        if self._coverage is not None and all(t in self._inside for t in matched):
            coverage = round(self._coverage.share(matched), 3)
        return L0Match(entry, tuple(keywords), tuple(inside), rarest, rarest_df, via, coverage=coverage,
                       exact=self._exact is not None and self._exact in matched)

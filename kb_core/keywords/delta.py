"""L0's applied changes without a full rebuild: a `DeltaSnapshot` is a base `Snapshot` plus what changed since.

A full `Snapshot` costs time in the number of documents (about a second of CPU at 100,000). One add, replace or
remove costs a `DeltaSnapshot` time in the size of the change and of the delta, plus a few copies of flat numpy
arrays over every position (microseconds): the index swaps one in per change, readers never wait, and a full
rebuild folds the delta into a new base on a background thread (`KnowledgeIndex`).

Every answer equals a full rebuild's over the same entries, in the same index order:

- Positions. A replaced entry keeps its position, a new one takes the next position after every other (as
  the index's dict of entries orders them), a removed one leaves a gap. Only relative order is ever used
  (ties, index order), and `size` (the positions, gaps included) sizes the masks.
- Terms. Base term ids stay; a keyword the base does not have gets an id after the base's, searched by a small
  `TermSearch` of its own. A term claimed by some changed position has its posting list and its count of pages
  (`df`, a page's translations counting once) recomputed at the change: base positions that were removed or
  replaced are masked out, the delta's positions merged in. A term nobody claims any longer is *dead*: its
  spans and containments are dropped before they could hide a shorter keyword, as a full rebuild would not
  have it at all. `term_order` gives the order of first claimants that a full rebuild's ids follow.
- Translation groups. A group keeps its id by its key; a document without one is a group of its own. The
  members of the groups a change touches are recomputed, and with them the number of pages (so
  `generic_limit`) and whether any page has several versions.
- Synonyms. The tables are rebuilt when a change touches a word of some synonym group (a member's term may
  have appeared or died); otherwise the base's are the same.

`consolidated()` builds the full `Snapshot` of the same entries (once; the suggester, the keyword map and the
index's background rebuild share it).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_core.keywords.matching import (
    L0View,
    Snapshot,
    TermSearch,
    entry_terms,
    generic_limit,
    synonym_spellings,
    synonym_tables,
)
from kb_core.terms import normalize_term

if TYPE_CHECKING:
    from kb_core.keywords.entry import KnowledgeEntry
    from kb_core.keywords.suggestions import Suggester

__all__ = ["DeltaSnapshot"]

_MISSING: Any = object()
_NO_POSITIONS = np.zeros(0, dtype=np.int32)


class _Positions:
    """file path -> position: the base's, with the paths whose position changed laid over it (None: removed)."""

    __slots__ = ("_base", "_changed")

    def __init__(self, base: dict[str, int], changed: dict[str, int | None]):
        self._base, self._changed = base, changed

    def get(self, path: str, default: Any = None) -> Any:
        pos = self._changed.get(path, _MISSING)
        if pos is _MISSING:
            return self._base.get(path, default)
        return default if pos is None else pos

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.get(path) is not None

    def __getitem__(self, path: str) -> int:
        pos = self.get(path)
        if pos is None:
            raise KeyError(path)
        return pos


class _ByPosition:
    """A per-position tuple of the base (entries, normalised keywords) with the delta's positions over it."""

    __slots__ = ("_base", "_delta")

    def __init__(self, base: tuple[Any, ...], delta: dict[int, Any]):
        self._base, self._delta = base, delta

    def __getitem__(self, pos: int) -> Any:
        found = self._delta.get(pos)
        return self._base[pos] if found is None else found


class _ByTerm:
    """A per-term tuple of the base (postings, df) with the recomputed terms over it."""

    __slots__ = ("_base", "_changed")

    def __init__(self, base: tuple[Any, ...], changed: dict[int, Any]):
        self._base, self._changed = base, changed

    def __getitem__(self, term_id: int) -> Any:
        found = self._changed.get(term_id, _MISSING)
        return self._base[term_id] if found is _MISSING else found


class _Terms:
    """term id -> normalised keyword: the base's terms, then the delta's new ones."""

    __slots__ = ("_base", "_extra", "_n")

    def __init__(self, base: tuple[str, ...], extra: tuple[str, ...]):
        self._base, self._extra, self._n = base, extra, len(base)

    def __getitem__(self, term_id: int) -> str:
        return self._base[term_id] if term_id < self._n else self._extra[term_id - self._n]


class _TermIds:
    """normalised keyword -> term id, for the terms some document claims (dead ones are not found)."""

    __slots__ = ("_base", "_extra", "_dead")

    def __init__(self, base: dict[str, int], extra: dict[str, int], dead: frozenset[int]):
        self._base, self._extra, self._dead = base, extra, dead

    def get(self, term: str, default: Any = None) -> Any:
        term_id = self._base.get(term)
        if term_id is None:
            term_id = self._extra.get(term)
        return default if term_id is None or term_id in self._dead else term_id

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __getitem__(self, term: str) -> int:
        term_id = self.get(term)
        if term_id is None:
            raise KeyError(term)
        return term_id


class _Groups:
    """group id -> its positions, for the groups of several documents (the base's, with the touched groups
    recomputed); false when no page has several versions."""

    __slots__ = ("_base", "_changed", "_multi")

    def __init__(self, base: dict[int, tuple[int, ...]], changed: dict[int, tuple[int, ...]], multi: int):
        self._base, self._changed, self._multi = base, changed, multi

    def get(self, gid: int, default: Any = None) -> Any:
        found = self._changed.get(gid)
        if found is None:
            return self._base.get(gid, default)
        return found if len(found) > 1 else default

    def __bool__(self) -> bool:
        return self._multi > 0


class DeltaSnapshot(L0View):
    """A base `Snapshot` and the changes since: immutable; `with_change` returns the next one."""

    def __init__(self, base: Snapshot, normalized_cache: dict[str, str] | None = None):
        """An empty delta over `base`."""
        self.base = base
        self.matching = base.matching
        self.generic_docs = base.generic_docs
        self.synonyms = base.synonyms
        self.size, self.count = base.size, base.count
        self.pages, self.generic_limit = base.pages, base.generic_limit
        self.group_of = base.group_of
        self.aliases, self.alias_terms, self.synonym_automaton = base.aliases, base.alias_terms, base.synonym_automaton
        self._cache = normalized_cache if normalized_cache is not None else {}
        self._spellings = synonym_spellings(base.synonyms)
        self._changes = 0
        self._masked = np.zeros(base.size, dtype=bool)  # base positions removed or replaced
        self._entries: dict[int, KnowledgeEntry] = {}  # position -> entry, for every live entry of the delta
        self._terms_at: dict[int, tuple[str, ...]] = {}  # ... and its normalised keywords
        self._moved: dict[str, int | None] = {}  # path -> position where it differs from the base's (None: gone)
        self._claims: dict[str, tuple[int, ...]] = {}  # term -> the delta's positions claiming it, in order
        self._postings: dict[int, np.ndarray] = {}  # term id -> posting list, for every term a change touched
        self._df: dict[int, int] = {}
        self._dead: frozenset[int] = frozenset()  # term ids no document claims any longer
        self._extra: tuple[str, ...] = ()  # terms the base does not have: ids len(base.terms) + i
        self._extra_id: dict[str, int] = {}
        self._extra_search: TermSearch | None = None
        self._group_ids: dict[str, int] = {}  # group keys the base does not have -> their ids
        self._next_gid = base.pages  # the base uses 0 .. pages - 1
        self._members: dict[int, tuple[int, ...]] = {}  # group id -> positions, for every group a change touched
        self._multi = len(base.group_members)  # groups of several documents
        self._lock = threading.Lock()
        self._consolidated: Snapshot | None = None
        self._titles: dict[str, list[str]] | None = None  # the delta's entries by normalised title, on first use
        self.build_seconds = 0.0  # how long `consolidated()` took
        self._bind()

    def _bind(self) -> None:
        """The read-only views over the current containers (what `RankedMatches` and the index read)."""
        base = self.base
        self.entries = _ByPosition(base.entries, self._entries)
        self.normalized_keywords = _ByPosition(base.normalized_keywords, self._terms_at)
        self.position = _Positions(base.position, self._moved)
        self.terms = _Terms(base.terms, self._extra)
        self.term_id = _TermIds(base.term_id, self._extra_id, self._dead)
        self.postings = _ByTerm(base.postings, self._postings)
        self.df = _ByTerm(base.df, self._df)
        self.group_members = _Groups(base.group_members, self._members, self._multi)
        self.has_terms = base.has_terms or self._extra_search is not None

    @property
    def delta_size(self) -> int:
        """Changes applied since the base was built (the index folds the delta in once it is large)."""
        return self._changes

    # -- changes -------------------------------------------------------------------------------------
    def with_change(self, path: str, entry: KnowledgeEntry | None) -> DeltaSnapshot:
        """This view with `path`'s entry added or replaced in place (`entry`), or removed (`None`)."""
        return self.with_changes([(path, entry)])

    def with_changes(self, changes: Sequence[tuple[str, KnowledgeEntry | None]]) -> DeltaSnapshot:
        """This view with each change applied in turn (the containers copied once, the terms recounted once)."""
        new: DeltaSnapshot = object.__new__(DeltaSnapshot)
        new.__dict__.update(self.__dict__)
        new._lock, new._consolidated, new.build_seconds, new._titles = threading.Lock(), None, 0.0, None
        new._entries, new._terms_at, new._moved = dict(self._entries), dict(self._terms_at), dict(self._moved)
        new._claims, new._members, new._group_ids = dict(self._claims), dict(self._members), dict(self._group_ids)
        new._bind()  # the views now read the copies, which the changes below update in place
        batch = _Batch()
        for path, entry in changes:
            new._change(path, entry, batch)
        if batch.masked is not None:
            new._masked = batch.masked
        if batch.group_of is not None or batch.appended:
            group_of = new.group_of if batch.group_of is None else batch.group_of
            new.group_of = np.concatenate((group_of, np.array(batch.appended, dtype=np.int32)))
        new.generic_limit = generic_limit(new.pages, new.generic_docs)
        new._recount(batch.terms)
        new._bind()
        return new

    def _change(self, path: str, entry: KnowledgeEntry | None, batch: _Batch) -> None:
        base = self.base
        old_pos = self.position.get(path)
        if old_pos is None and entry is None:
            return
        self._changes += 1
        old_entry = old_terms = None
        was_delta = old_pos in self._entries
        if old_pos is not None:
            old_entry, old_terms = self.entries[old_pos], self.normalized_keywords[old_pos]
            if not was_delta:  # the base's entry goes
                batch.mask(self._masked)[old_pos] = True
        pos = self.size if old_pos is None else old_pos
        new_terms: tuple[str, ...] = ()
        if entry is None:
            self._entries.pop(pos, None)  # (a base entry was never in it: it is masked above)
            self._terms_at.pop(pos, None)
        else:
            new_terms = entry_terms(entry, self._cache)
            self._entries[pos], self._terms_at[pos] = entry, new_terms
        if old_pos is None or entry is None:
            if entry is None and path not in base.position:
                del self._moved[path]  # added since the base and gone again
            else:
                self._moved[path] = None if entry is None else pos
            self.count += 1 if entry is not None else -1
            self.size += old_pos is None
        claims = self._claims
        if old_terms:
            if was_delta:  # a delta entry's claims go (a base entry's are masked)
                for term in old_terms:
                    kept = tuple(p for p in claims[term] if p != old_pos)
                    if kept:
                        claims[term] = kept
                    else:
                        del claims[term]
            batch.terms.update(dict.fromkeys(old_terms))
        for term in new_terms:
            found = list(claims.get(term, ()))
            bisect.insort(found, pos)
            claims[term] = tuple(found)
        batch.terms.update(dict.fromkeys(new_terms))
        self._regroup(old_pos, old_entry, pos, entry, batch)

    def _regroup(self, old_pos: int | None, old_entry: KnowledgeEntry | None, pos: int,
                 entry: KnowledgeEntry | None, batch: _Batch) -> None:
        """Group ids and members after the document at `old_pos` became `entry` at `pos`."""
        old_gid = None if old_pos is None else batch.gid_at(self.group_of, old_pos)
        gid = None
        if entry is not None:
            if entry.group:
                gid = self.base.group_ids.get(entry.group, self._group_ids.get(entry.group))
                if gid is None:
                    gid = self._group_ids[entry.group] = self._new_gid()
            elif old_entry is not None and not old_entry.group:
                gid = old_gid  # a page of its own stays one
            else:
                gid = self._new_gid()
            batch.set_gid(self.group_of, pos, gid)
        for touched in dict.fromkeys(g for g in (old_gid, gid) if g is not None):
            before = self._members_of(touched, old_pos)
            after = [p for p in before if p != old_pos]
            if touched == gid:
                bisect.insort(after, pos)
            self._members[touched] = tuple(after)
            self.pages += (len(after) > 0) - (len(before) > 0)
            self._multi += (len(after) > 1) - (len(before) > 1)

    def _new_gid(self) -> int:
        self._next_gid += 1
        return self._next_gid - 1

    def _members_of(self, gid: int, old_pos: int | None) -> tuple[int, ...]:
        found = self._members.get(gid)
        if found is not None:
            return found
        base = self.base
        if gid >= base.pages:
            return ()
        found = base.group_members.get(gid)
        if found is not None:
            return found
        if old_pos is not None and old_pos < base.size and int(base.group_of[old_pos]) == gid:
            return (old_pos,)  # the base's page of one document, untouched until now
        return tuple(np.flatnonzero(base.group_of == gid).tolist())

    def _recount(self, terms: dict[str, None]) -> None:
        """Posting lists and page counts of the terms a change touched."""
        base = self.base
        if not terms:
            return
        postings, df, dead = dict(self._postings), dict(self._df), set(self._dead)
        extra = None
        masked, multi, group_of = self._masked, self._multi, self.group_of
        for term in terms:
            term_id = base.term_id.get(term)
            if term_id is not None:
                positions = base.postings[term_id]
                hidden = masked[positions]
                if hidden.any():
                    positions = positions[~hidden]
            else:
                term_id = self._extra_id.get(term)
                if term_id is None:
                    if extra is None:
                        extra, self._extra_id = list(self._extra), dict(self._extra_id)
                    term_id = self._extra_id[term] = len(base.terms) + len(extra)
                    extra.append(term)
                positions = _NO_POSITIONS
            claims = self._claims.get(term)
            if claims:
                positions = _merged(positions, np.array(claims, dtype=np.int32))
            postings[term_id] = positions
            df[term_id] = _pages_of(positions, group_of, multi)
            if len(positions):
                dead.discard(term_id)
            else:
                dead.add(term_id)
        self._postings, self._df, self._dead = postings, df, frozenset(dead)
        if extra is not None:
            self._extra = tuple(extra)
            self._extra_search = TermSearch(self._extra)
        if self._spellings and not self._spellings.isdisjoint(terms):
            term_ids = _TermIds(base.term_id, self._extra_id, self._dead)
            self.aliases, self.alias_terms, self.synonym_automaton = synonym_tables(self.synonyms, term_ids)

    # -- matching ------------------------------------------------------------------------------------
    def spans_in(self, query: str, words: bool) -> list[tuple[int, int, int]]:
        dead = self._dead
        spans = self.base.search.spans(query, words)
        if dead:
            spans = [span for span in spans if span[2] not in dead]
        if self._extra_search is not None:
            first = len(self.base.terms)
            spans += [(start, stop, first + i) for start, stop, i in self._extra_search.spans(query, words)
                      if first + i not in dead]
        return spans

    def terms_containing(self, query: str, words: bool) -> set[int]:
        found = self.base.search.containing(query, words)
        if self._dead:
            found -= self._dead
        if self._extra_search is not None:
            first = len(self.base.terms)
            found.update(first + i for i in self._extra_search.containing(query, words)
                         if first + i not in self._dead)
        return found

    def term_order(self, term_id: int) -> tuple[int, int]:
        """A full rebuild numbers terms by their first claimant, then by their place among its keywords."""
        first = int(self.postings[term_id][0])
        return first, self.normalized_keywords[first].index(self.terms[term_id])

    # -- the same entries, built in full ---------------------------------------------------------------
    def live_entries(self) -> tuple[KnowledgeEntry, ...]:
        base = self.base
        entries = list(base.entries)
        keep = ~self._masked
        appended = []
        for pos, entry in self._entries.items():
            if pos < base.size:
                entries[pos] = entry
                keep[pos] = True
            else:
                appended.append(pos)
        kept = list(compress(entries, keep.tolist()))
        kept += [self._entries[pos] for pos in sorted(appended)]
        return tuple(kept)

    def consolidated(self) -> Snapshot:
        """The full `Snapshot` of the same entries: built once (a second caller waits for the first)."""
        with self._lock:
            if self._consolidated is None:
                started = time.perf_counter()
                # (a cache of its own: filled with every keyword, it would outlive the build in the delta's)
                self._consolidated = Snapshot(self.live_entries(), self.matching, None, self.generic_docs,
                                              self.synonyms)
                self.build_seconds = time.perf_counter() - started
            return self._consolidated

    def suggester(self) -> Suggester:
        return self.consolidated().suggester()

    def titled(self, query: str) -> tuple[str, ...]:
        """The base's titled documents still in place, then the delta's own (a lookup never waits for
        `consolidated()`)."""
        base = self.base
        kept = [p for p in base.titled(query) if not self._masked[base.position[p]]]
        if self._titles is None:
            titles: dict[str, list[str]] = {}
            for entry in self._entries.values():
                title = normalize_term(entry.title)
                if title:
                    titles.setdefault(title, []).append(entry.file_path)
            self._titles = titles
        return (*kept, *self._titles.get(query, ()))

    @property
    def has_suggester(self) -> bool:
        return self._consolidated is not None and self._consolidated.has_suggester


class _Batch:
    """What one `with_changes` collects: the terms touched, and the copies of the flat arrays it changes (made
    once per batch, not once per change; positions added are kept in a list until the end)."""

    def __init__(self) -> None:
        self.terms: dict[str, None] = {}
        self.masked: np.ndarray | None = None
        self.group_of: np.ndarray | None = None
        self.appended: list[int] = []

    def mask(self, masked: np.ndarray) -> np.ndarray:
        if self.masked is None:
            self.masked = masked.copy()
        return self.masked

    def gid_at(self, group_of: np.ndarray, pos: int) -> int:
        if pos >= group_of.size:
            return self.appended[pos - group_of.size]
        return int((group_of if self.group_of is None else self.group_of)[pos])

    def set_gid(self, group_of: np.ndarray, pos: int, gid: int) -> None:
        if pos >= group_of.size + len(self.appended):
            self.appended.append(gid)
        elif pos >= group_of.size:
            self.appended[pos - group_of.size] = gid
        elif self.gid_at(group_of, pos) != gid:
            if self.group_of is None:
                self.group_of = group_of.copy()
            self.group_of[pos] = gid


def _merged(positions: np.ndarray, added: np.ndarray) -> np.ndarray:
    """Two sorted, disjoint position arrays as one sorted array."""
    if not len(positions):
        return added
    if added[0] > positions[-1]:
        return np.concatenate((positions, added))
    return np.insert(positions, np.searchsorted(positions, added), added)


def _pages_of(positions: np.ndarray, group_of: np.ndarray, multi: int) -> int:
    """How many pages the documents at `positions` are (a page's translations counting once)."""
    if len(positions) <= 1 or not multi:
        return len(positions)
    gids = group_of[positions]
    if len(gids) < 64:
        return len(set(gids.tolist()))
    return int(np.count_nonzero(np.bincount(gids)))

"""A built L0 snapshot (`matching.Snapshot`) as plain data and back, for the saved snapshot file
(`snapshot_file`): small values as JSON, the search structures as flat integer arrays, the terms
as one NUL-joined text. Nothing here can build anything but strings, numbers, tuples, dicts and arrays; every
array is checked (length, order, range) before it is used, so a file that passed the tag but is wrong anyway
makes the open build the index from the entries instead.

What is derived in a few milliseconds is not saved: the automata (rebuilt from the terms: ~0.1 s at 100,000
documents), the dicts by path, group key and term, the generic limit and the synonym tables.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kb_core.keywords.entry import KnowledgeEntry, int_array
from kb_core.keywords.matching import (
    _SEPARATOR,
    JoinedTerms,
    Postings,
    Ragged,
    Snapshot,
    TermIds,
    TermSearch,
    build_automaton,
    generic_limit,
    synonym_tables,
)
from kb_core.terms import normalize_term

__all__ = ["data_of_snapshot", "snapshot_of_data"]

# 2: the entries' normalised titles are saved too (the exact-title table an answer needs: building it decoded
# every entry's title, a quarter of a fresh `kb lookup` at 10,000 pages). 1 is read as well (no titles).
_FORMAT = 2
_FORMATS = (1, 2)


def data_of_snapshot(view: Snapshot, entries: Sequence[KnowledgeEntry]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(small values, named arrays) of a full snapshot whose entries are exactly `entries`, in order."""
    if type(view) is not Snapshot or len(view.entries) != len(entries) or \
            not all(a is b for a, b in zip(view.entries, entries, strict=True)):
        raise ValueError("only a full snapshot of the saved entries is saved")
    search = view.search
    small = {"format": _FORMAT, "matching": view.matching, "size": view.size, "pages": view.pages,
             "generic_docs": view.generic_docs, "synonyms": [list(g) for g in view.synonyms],
             "longest": search.longest, "df": list(view.df),
             "group_members": [[gid, list(ps)] for gid, ps in view.group_members.items()],
             "word_runs": [list(search.word_runs),
                           [v if type(v) is int else list(v) for v in search.word_runs.values()]]}
    arrays = {"joined": search.joined.encode("utf-8"), "offsets": search.offsets.tobytes(),
              "postings": _int32(view.postings.flat), "postings_starts": view.postings.starts.tobytes(),
              "terms_of": _int32(view.normalized_keywords.flat),
              "terms_of_starts": view.normalized_keywords.starts.tobytes(), "group_of": _int32(view.group_of),
              "titles": "\0".join(normalize_term(e.title) for e in entries).encode("utf-8")}
    return small, arrays


def _int32(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype=np.int32).tobytes()


def snapshot_of_data(small: dict[str, Any], blob: Callable[[str], memoryview],
                     entries: tuple[KnowledgeEntry, ...]) -> Snapshot:
    """The snapshot `data_of_snapshot` described, over these entries (the saved records' own). `ValueError`
    (or `TypeError`, `KeyError`) for anything that is not exactly such a snapshot."""
    if small.get("format") not in _FORMATS:
        raise ValueError("a saved index of another format")
    size, pages = _int(small["size"]), _int(small["pages"])
    if size != len(entries) or not 0 <= pages <= size:
        raise ValueError("a saved index of other entries")
    generic_docs = small["generic_docs"]
    if generic_docs is not None:
        generic_docs = _int(generic_docs)
    matching = small["matching"]
    if type(matching) is not str:
        raise ValueError("no matching rule")

    joined = bytes(blob("joined")).decode("utf-8")
    offsets = int_array(blob("offsets"), "q")
    n_terms = len(offsets) - 1
    if n_terms < 0 or offsets[0] != 0 or (n_terms and offsets[-1] != len(joined) + 1) or (
            not n_terms and joined) or not _ascending(offsets):
        raise ValueError("term offsets out of order")
    terms = JoinedTerms(joined, offsets)
    if n_terms and joined.count(_SEPARATOR) != n_terms - 1:
        raise ValueError("terms that do not match their offsets")

    postings = _runs(blob("postings"), blob("postings_starts"), n_terms, size)
    terms_of = _runs(blob("terms_of"), blob("terms_of_starts"), size, n_terms)
    group_of = np.frombuffer(bytes(blob("group_of")), dtype=np.int32).copy()
    if len(group_of) != size or (size and not (0 <= group_of.min() and group_of.max() < pages)):
        raise ValueError("translation groups out of range")
    df = small["df"]
    if type(df) is not list or len(df) != n_terms or not all(type(d) is int and 0 <= d <= size for d in df):
        raise ValueError("document frequencies out of range")
    members: dict[int, tuple[int, ...]] = {}
    for gid, positions in small["group_members"]:
        if not (_int(gid) < pages and type(positions) is list and len(positions) > 1
                and all(type(p) is int and 0 <= p < size for p in positions)):
            raise ValueError("group members out of range")
        members[gid] = tuple(positions)
    runs, where = small["word_runs"]
    if type(runs) is not list or type(where) is not list or len(runs) != len(where) or \
            not all(type(r) is str for r in runs):
        raise ValueError("word runs of another shape")
    word_runs: dict[str, int | tuple[int, ...]] = {}
    for run, ids in zip(runs, where, strict=True):
        if type(ids) is int:
            valid = 0 <= ids < n_terms
        else:
            valid = type(ids) is list and all(type(i) is int and 0 <= i < n_terms for i in ids)
            ids = tuple(ids) if valid else ids
        if not valid:
            raise ValueError("word runs out of range")
        word_runs[run] = ids
    synonyms = small["synonyms"]
    if type(synonyms) is not list or not all(type(g) is list and all(type(w) is str for w in g) for g in synonyms):
        raise ValueError("synonyms of another shape")

    search = TermSearch.__new__(TermSearch)
    search.terms = terms
    search.automaton = build_automaton(terms) if n_terms else None
    search.joined, search.offsets, search.longest, search.word_runs = joined, offsets, _int(small["longest"]), word_runs
    view = Snapshot.__new__(Snapshot)
    state = {"entries": entries, "size": size, "count": size, "matching": matching,
             "normalized_keywords": Ragged(terms, terms_of[0], terms_of[1]),
             "postings": Postings(postings[0], postings[1]), "group_of": group_of, "pages": pages,
             "generic_docs": generic_docs, "generic_limit": generic_limit(pages, generic_docs),
             "group_members": members, "df": tuple(df), "search": search, "automaton": search.automaton,
             "has_terms": search.automaton is not None, "synonyms": tuple(tuple(g) for g in synonyms)}
    view.__setstate__(state)
    view.aliases, view.alias_terms, view.synonym_automaton = synonym_tables(view.synonyms, TermIds(
        view.automaton, view.terms))
    if small["format"] >= 2:
        view.set_titles(bytes(blob("titles")).decode("utf-8").split("\0") if size else [])
    return view


def _runs(flat_data: memoryview, starts_data: memoryview, runs: int, bound: int) -> tuple[np.ndarray, array]:
    """A flat int32 array cut at `starts` (int64) into `runs` runs of values in 0 .. bound - 1, checked."""
    flat = np.frombuffer(bytes(flat_data), dtype=np.int32).copy()
    starts = int_array(starts_data, "q")
    if len(starts) != runs + 1 or starts[0] != 0 or starts[-1] != len(flat) or not _ascending(starts):
        raise ValueError("runs out of order")
    if len(flat) and not (0 <= flat.min() and flat.max() < bound):
        raise ValueError("run values out of range")
    return flat, starts


def _ascending(values: array) -> bool:
    return len(values) < 2 or bool((np.diff(np.frombuffer(values, dtype=np.int64)) >= 0).all())


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, not {value!r}")
    return value

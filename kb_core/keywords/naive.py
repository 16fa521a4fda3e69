"""The L0 rules written as plainly as possible: the reference the index is checked against (property tests)
and timed against (the benchmark), exported as `kb_core.testing.NaiveIndex`. Loops over every keyword of every
document; never used at run time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kb_core.terms import aligned, normalize_term


def _occurrences(text: str, part: str) -> list[int]:
    found, start = [], text.find(part)
    while start != -1:
        found.append(start)
        start = text.find(part, start + 1)
    return found


class NaiveIndex:
    """`exact_match` by brute force, in the same mode as the index under test.

    - `substring`: the spec's literal rule: for every document, for every keyword, `q in k or k in q`;
    - `words`: the same two directions, each occurrence word-aligned at Latin/digit/underscore edges, and a
      keyword occurrence inside a longer matched keyword's occurrence in the query does not count.
    Keywords are normalised once up front, which is kinder to the reference than doing it per query.
    """

    def __init__(self, entries: Sequence[Any], matching: str = "words"):
        self._entries = [(e, [normalize_term(k) for k in e.keywords]) for e in entries]
        self._matching = matching

    def exact_match(self, query: str) -> list[Any]:
        q = normalize_term(query)
        if not q:
            return []
        if self._matching == "substring":
            return [e for e, keywords in self._entries if any(k and (k in q or q in k) for k in keywords)]
        spans = []
        counting = set()
        for _entry, keywords in self._entries:
            for k in keywords:
                if not k:
                    continue
                spans += [(s, s + len(k), k) for s in _occurrences(q, k) if aligned(q, s, s + len(k))]
                if any(aligned(k, s, s + len(q)) for s in _occurrences(k, q)):
                    counting.add(k)
        for start, stop, k in spans:
            if not any(s2 <= start and stop <= e2 and e2 - s2 > stop - start for s2, e2, _ in spans):
                counting.add(k)
        return [e for e, keywords in self._entries if any(k in counting for k in keywords)]

"""Did you mean, beyond the keywords: identifiers that occur in the pages' text.

Most pages declare few identifier keywords (a documentation tree's frontmatter says "SQL", "pipeline"), while
their text names hundreds of things: `other_ranges`, `strict_headers`, `SA8155P`. A typing slip in one of
those ("othre_anges") hits no keyword, and L1 cannot find a word that occurs nowhere. This builds the same
`Suggester` (`suggestions.py`: the same distance rule, digits rule and ranking) over the identifier-shaped
tokens of every chunk, each page claiming the identifiers its chunks hold; the lookup asks it after the
keyword suggester, for the slots that one left.

Built from the full-text index's chunks (the SQLite FTS5 sidecar of the embedded mode) on a background
thread, never on a lookup's: about a second per 10,000 chunks. Until it is built, and for a Milvus server
without the sidecar, it suggests nothing. It is rebuilt, again in the background, when the chunks have
changed, looked at no more often than every `recheck` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from kb_core.keywords.suggestions import MAX_LENGTH, MIN_LENGTH, Suggester, Suggestion, identifier_tokens
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

MAX_PER_PAGE = 2000  # identifiers one page contributes (a generated reference page can hold tens of thousands)


@dataclass(frozen=True)
class _Page:
    """What the suggester reads of a claimant (`KnowledgeEntry`'s fields of the same names)."""

    file_path: str
    title: str
    lang: str
    keywords: tuple[str, ...]  # the identifiers in its text, as first spelled


class _Vocabulary:
    """`suggestions.Vocabulary` over the pages' identifiers."""

    def __init__(self, pages: Sequence[_Page], group_of: Callable[[str], str]):
        self.entries = pages
        self.term_id: dict[str, int] = {}
        holders: list[list[int]] = []
        for pos, page in enumerate(pages):
            for spelling in page.keywords:
                term = normalize_term(spelling)
                tid = self.term_id.setdefault(term, len(holders))
                if tid == len(holders):
                    holders.append([])
                if not holders[tid] or holders[tid][-1] != pos:
                    holders[tid].append(pos)
        self.terms = list(self.term_id)
        self.postings = [np.asarray(h, dtype=np.int64) for h in holders]
        self.df = [len(h) for h in holders]
        groups: dict[str, int] = {}
        self.group_of = np.fromiter((groups.setdefault(group_of(p.file_path), len(groups)) for p in pages),
                                    dtype=np.int64, count=len(pages))


class BodyIdentifierSuggester:
    """`suggest(query, limit, lang)` over the identifiers in the chunks that `texts()` yields as (source, text)."""

    def __init__(self, texts: Callable[[], Iterable[tuple[str, str]]], version: Callable[[], object],
                 describe: Callable[[str], tuple[str, str, str] | None], *, recheck: float = 30.0):
        """`describe(source)`: (title, lang, translation group) of a page L0 knows, else None."""
        self._texts = texts
        self._version = version
        self._describe = describe
        self._recheck = recheck
        self._suggester: Suggester | None = None
        self._built_version: object = None
        self._checked = -recheck
        self._building = threading.Lock()

    def suggest(self, query: str, limit: int, lang: str | None = None) -> list[Suggestion]:
        if time.monotonic() - self._checked >= self._recheck:
            self.refresh_in_background()
        suggester = self._suggester
        return suggester.suggest(query, limit, lang) if suggester is not None else []

    def refresh_in_background(self) -> None:
        self._checked = time.monotonic()
        if self._building.locked():
            return
        threading.Thread(target=self.refresh, name="kb-body-identifiers", daemon=True).start()

    def refresh(self, *, wait: bool = False) -> None:
        """Rebuild now if the chunks changed since the last build (one build at a time: with `wait`, after the
        one under way, which may have missed the latest change)."""
        if not self._building.acquire(blocking=wait):
            return
        try:
            version = self._version()
            if version == self._built_version and self._suggester is not None:
                return
            started = time.perf_counter()
            self._suggester = Suggester(self._vocabulary())
            self._built_version = version
            log.info("did you mean: %d identifiers from the pages' text in %.2f s", len(self._suggester),
                     time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - a hint only: the keyword suggester still answers
            log.warning("the identifiers of the pages' text could not be read: %s", exc)
        finally:
            self._building.release()

    def _vocabulary(self) -> _Vocabulary:
        found: dict[str, dict[str, None]] = {}
        for source, text in self._texts():
            seen = found.setdefault(source, {})
            if len(seen) >= MAX_PER_PAGE:
                continue
            for token in identifier_tokens(text):
                if MIN_LENGTH <= len(token) <= MAX_LENGTH:
                    seen.setdefault(token, None)
        pages = []
        groups: dict[str, str] = {}
        for source, identifiers in found.items():
            title, lang, group = self._describe(source) or ("", "", source)
            groups[source] = group
            pages.append(_Page(source, title, lang, tuple(identifiers)[:MAX_PER_PAGE]))
        return _Vocabulary(pages, groups.__getitem__)

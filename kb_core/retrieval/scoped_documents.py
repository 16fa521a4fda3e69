"""The documents a scope admits, as the ids L1 searches within.

L1 searches chunks, which know their document's id; whether a document is in a scope is decided from what L0
knows of its page (category, language, audience). Documents without frontmatter have chunks but no L0 entry:
their category is their folder, their language the path's, their audience their folder's default
(`source_admitted`, the one rule for both).

One id set per scope. Reading every row costs a fraction of a second at 10,000 documents, so a question never
waits for it once a set exists: after a write (a new L0 view) or `MAX_AGE` seconds (a minute) the set is read again in
the background and the question uses the last one. A set that is a moment old can only miss a page written
since (its passages show once the set is read again) or include one whose audience just changed - which the
lookup's check of every passage's source against the current L0 leaves out (`HybridLookup`).
"""

from __future__ import annotations

import logging
import threading
import time

from kb_core.documents.language import document_language
from kb_core.documents.scope import Scope
from kb_core.keywords.index import KnowledgeIndex
from kb_core.storage.ports import MetadataRepository

log = logging.getLogger(__name__)


def source_admitted(index: KnowledgeIndex, scope: Scope, source: str) -> bool:
    """Whether `scope` admits the document at `source`: by its L0 entry, or without one by its path."""
    entry = index.get(source)
    if entry is not None:
        return scope.admits_entry(entry)
    folder = index.folder
    relative = folder.relative_path(source)
    if relative is None:
        return False
    return scope.admits(folder.category_of(relative), document_language(relative, None, ""), ())


class ScopedDocuments:
    MAX_AGE = 60.0  # for documents without frontmatter (no L0 view changes with them)
    MAX_SCOPES = 64

    def __init__(self, metadata: MetadataRepository, index: KnowledgeIndex):
        self._metadata = metadata
        self._index = index
        self._lock = threading.Lock()
        self._cache: dict[Scope, tuple[object, float, frozenset[int]]] = {}
        self._refreshing: set[Scope] = set()

    def ids(self, scope: Scope) -> frozenset[int]:
        view, now = self._index.view, time.monotonic()
        with self._lock:
            kept = self._cache.get(scope)
            stale = kept is not None and (kept[0] is not view or now - kept[1] >= self.MAX_AGE)
            start = stale and scope not in self._refreshing
            if start:
                self._refreshing.add(scope)
        if kept is None:
            return self._read(scope)
        if start:
            threading.Thread(target=self._refresh, args=(scope,), name="kb-scope-ids", daemon=True).start()
        return kept[2]

    def _refresh(self, scope: Scope) -> None:
        try:
            self._read(scope)
        except Exception as exc:  # noqa: BLE001 - the database is away: the last set serves, the next look retries
            log.warning("could not read the documents of a scope again: %s", exc)
        finally:
            with self._lock:
                self._refreshing.discard(scope)

    def _read(self, scope: Scope) -> frozenset[int]:
        view, now = self._index.view, time.monotonic()  # taken first: a write meanwhile makes the set stale
        mask, position = self._index.scope_mask(scope, view), view.position  # L0's own answer for its pages
        found = frozenset(doc_id for doc_id, path in self._metadata.document_ids_and_paths()
                          if ((pos := position.get(path)) is not None and (mask is None or mask[pos]))
                          or (pos is None and source_admitted(self._index, scope, path)))
        with self._lock:
            if len(self._cache) >= self.MAX_SCOPES:
                self._cache.clear()
            self._cache[scope] = (view, now, found)
        return found

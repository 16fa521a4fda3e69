"""The documents a scope admits, as the ids L1 searches within (issue 35).

L1 searches chunks, which know their document's id; whether a document is in a scope is decided from what L0
knows of its page (category, language, audience). Documents without frontmatter have chunks but no L0 entry:
their category is their folder, their language the path's, their audience their folder's default.

One list per scope, kept while L0's view is the same (every indexed write replaces the view) and at most
`MAX_AGE` seconds (a document without frontmatter changes no view), so a scoped question costs a set lookup,
not a scan of the database.
"""

from __future__ import annotations

import threading
import time

from kb_core.documents.language import document_language
from kb_core.retrieval.keyword_index import KnowledgeIndex
from kb_core.retrieval.scope import Scope
from kb_core.storage.ports import MetadataRepository


class ScopedDocuments:
    MAX_AGE = 10.0
    MAX_SCOPES = 64

    def __init__(self, metadata: MetadataRepository, index: KnowledgeIndex):
        self._metadata = metadata
        self._index = index
        self._lock = threading.Lock()
        self._cache: dict[Scope, tuple[object, float, frozenset[int]]] = {}

    def ids(self, scope: Scope) -> frozenset[int]:
        view, now = self._index.view, time.monotonic()
        with self._lock:
            kept = self._cache.get(scope)
        if kept is not None and kept[0] is view and now - kept[1] < self.MAX_AGE:
            return kept[2]
        found = frozenset(self._admitted(scope))
        with self._lock:
            if len(self._cache) >= self.MAX_SCOPES:
                self._cache.clear()
            self._cache[scope] = (view, now, found)
        return found

    def _admitted(self, scope: Scope) -> list[int]:
        index, folder = self._index, self._index.folder
        out = []
        for record in self._metadata.list_documents():
            entry = index.get(record.file_path)
            if entry is not None:
                ok = scope.admits_entry(entry)
            else:
                relative = folder.relative_path(record.file_path) or f"{record.category}/{record.file_name}"
                ok = scope.admits(record.category, document_language(relative, None, ""), ())
            if ok:
                out.append(record.id)
        return out

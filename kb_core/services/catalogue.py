"""What a knowledge base holds, as every console page lists it: documents, categories, languages, the files not
indexed yet and the documents whose file is gone. Each is one read of the stores, kept in the knowledge base's
`SummaryCache` until a write or a change from the feed (`kb_core.ops.summaries`, the one cache rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb_core.documents.language import document_language
from kb_core.errors import KnowledgeBaseError
from kb_core.retrieval.scoped_documents import source_admitted

if TYPE_CHECKING:
    from kb_core.documents.scope import Scope
    from kb_core.ops.summaries import SummaryCache
    from kb_core.services.parts import Parts
    from kb_core.storage.metadata_store import DocumentRecord


class Catalogue:
    def __init__(self, parts: Parts, summaries: SummaryCache):
        self._folder = parts.folder
        self._index = parts.index
        self._metadata = parts.metadata
        self._summaries = summaries

    def documents(self) -> list[DocumentRecord]:
        return list(self._summaries.get("documents", lambda: tuple(self._metadata.list_documents())))

    def readable_ids(self, scope: Scope) -> frozenset[int] | None:
        """The ids of the documents `scope` admits, to search within (None: every document)."""
        if scope.everything:
            return None
        return frozenset(r.id for r in self.documents() if source_admitted(self._index, scope, r.file_path))

    def scan(self, max_age: float | None = None) -> tuple[list[str], list[tuple[str, str]]]:
        """The folder's documents and refused files: one walk serves the status and the unindexed files."""
        return self._summaries.get("scan", self._folder.scan, max_age=max_age)

    def unindexed_files(self) -> list[str]:
        return list(self._summaries.get("unindexed", self._read_unindexed))

    def _read_unindexed(self) -> tuple[str, ...]:
        stored = {d.file_path for d in self.documents()}
        on_disk = (self._folder.display_path(rel) for rel in self.scan()[0])
        return tuple(path for path in on_disk if path not in stored)

    def missing_files(self) -> list[DocumentRecord]:
        """A stat per document: cached like the rest."""
        return list(self._summaries.get("missing", lambda: tuple(
            r for r in self.documents() if r.pending_operation is None and not self._folder.exists(r.file_path))))

    def categories(self) -> list[str]:
        return list(self._summaries.get("categories", self._read_categories))

    def _read_categories(self) -> tuple[str, ...]:
        folders = self._folder.categories()
        try:
            stored = {r.category for r in self.documents()}
        except KnowledgeBaseError:
            stored = set()
        return tuple(sorted(folders | stored))

    def languages(self) -> dict[str, str]:
        """Each indexed document's language by its path: L0's, or for a document L0 does not hold (no
        frontmatter) the same rule applied to its path and text."""
        return dict(self._summaries.get("languages", self._read_languages))

    def _read_languages(self) -> tuple[tuple[str, str], ...]:
        found = []
        for record in self.documents():
            entry = self._index.get(record.file_path)
            if entry is not None:
                found.append((record.file_path, entry.lang))
                continue
            relative = self._folder.relative_path(record.file_path) or f"{record.category}/{record.file_name}"
            text = (self._folder.read_text(record.file_path, 4000) or "") if self._folder.exists(record.file_path) \
                else ""
            found.append((record.file_path, document_language(relative, record.frontmatter, text)))
        return tuple(found)

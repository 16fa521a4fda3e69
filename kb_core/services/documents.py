"""`kb.documents`: the documents one actor may read, and the writes its role allows.

Reads keep to the actor's pages: a page of another audience is not listed, `get` and `entry` answer None for
it, `text` None and `chunks` nothing, as for a page that does not exist. Writes check the role (curators write
documents, admins re-index and reconcile) and go through `Acting.writing`, which records who wrote."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.documents.batch import BatchFile, BatchPreview, preview_batch
from kb_core.documents.lint import UploadPreview, preview_upload
from kb_core.documents.service import DeleteOutcome
from kb_core.errors import DocumentError
from kb_core.progress import Progress

if TYPE_CHECKING:
    from kb_core.documents.document_edit import FrontmatterEdit
    from kb_core.documents.frontmatter_edit import FrontmatterFields
    from kb_core.documents.reconcile import ReconcileReport
    from kb_core.documents.service import ReindexReport, UploadOutcome
    from kb_core.keywords.entry import KnowledgeEntry
    from kb_core.retrieval.attention import DocumentSuggestion
    from kb_core.services.acting import Acting
    from kb_core.services.catalogue import Catalogue
    from kb_core.services.editing import EditingService
    from kb_core.services.parts import Parts
    from kb_core.storage.metadata_store import DocumentRecord
    from kb_core.storage.ports import ChunkRow


class Documents:
    def __init__(self, parts: Parts, catalogue: Catalogue, editing: EditingService, acting: Acting):
        self._parts = parts
        self._catalogue = catalogue
        self._editing = editing
        self._acting = acting

    # -- what it holds (cached until a write or a change from the feed) ------------------------------------
    def list(self) -> list[DocumentRecord]:
        """The indexed documents the actor may read."""
        return self._acting.readable(self._catalogue.documents(), lambda r: r.file_path)

    def get(self, doc_id: int) -> DocumentRecord | None:
        record = self._parts.metadata.get(doc_id)
        return record if record is not None and self._acting.may_read(record.file_path) else None

    def chunks(self, doc_id: int) -> list[ChunkRow]:
        """The document's chunks as Milvus holds them (none for a document the actor may not read)."""
        return [] if self.get(doc_id) is None else self._parts.vectors.chunks_of(doc_id)

    def text(self, file_path: str, max_chars: int = 1_000_000) -> str | None:
        """The raw text of a document's file (cut at `max_chars`); the agents' tool is `read_document_tool`."""
        path = self._parts.folder.document_path(file_path) if isinstance(file_path, str) else None
        if not self._acting.may_read(path):
            return None
        return self._parts.folder.read_text(file_path, max_chars)

    def entry(self, file_path: str) -> KnowledgeEntry | None:
        """What L0 holds for a document (keywords it matches and ignores, sections), or `None`."""
        entry = self._parts.index.get(file_path)
        return entry if entry is not None and self._acting.may_read(entry.file_path) else None

    def versions(self, file_path: str) -> tuple[KnowledgeEntry, ...]:
        """The versions of a document's page in every language L0 holds (itself included; empty: not in L0)."""
        return tuple(self._acting.readable(self._parts.index.versions(file_path), lambda e: e.file_path))

    def languages(self) -> dict[str, str]:
        """Each readable document's language by its path (`en`, `zh`, ..., `und`), also without frontmatter."""
        found = self._catalogue.languages()
        return {path: found[path] for path in self._acting.readable(found, lambda path: path)}

    def categories(self) -> list[str]:
        """Categories in use: folders under the knowledge base and categories of stored documents; for an actor
        limited to some audiences, the categories of the documents it may read."""
        if not self._acting.limited:
            return self._catalogue.categories()
        return sorted({r.category for r in self.list()})

    def unindexed_files(self) -> list[str]:
        """Markdown files on disk without a database row (the first run's prompt)."""
        return self._acting.readable(self._catalogue.unindexed_files(), lambda path: path)

    def missing_files(self) -> list[DocumentRecord]:
        """Documents whose file has gone from disk."""
        return self._acting.readable(self._catalogue.missing_files(), lambda r: r.file_path)

    def path(self, path: str) -> str | None:
        """The path a document is stored under (`knowledge_base/api/x.md`) for that path or one relative to the
        knowledge base (`api/x.md`, a `?doc=` link's); `None` for what cannot be one. Reads nothing."""
        return self._parts.folder.document_path(path)

    def relative_path(self, file_path: str) -> str | None:
        """`api/x.md` for `knowledge_base/api/x.md`; `None` outside the knowledge base."""
        return self._parts.folder.relative_path(file_path)

    def fields(self, file_path: str) -> FrontmatterFields:
        """The editable fields of a document's frontmatter on disk now: title, summary, keywords and sections
        (`exists` False: the file has no frontmatter block; an edit adds one). A block that is not valid YAML
        raises `FrontmatterError` with the parser's reason."""
        self._check_readable(file_path)
        return self._editing.fields(file_path)

    def suggest(self, query: str, limit: int = 5) -> list[DocumentSuggestion]:
        """The readable documents L1 finds for `query` (one that needs attention), best first: the agents'
        search and relevance check, L1 alone, not logged as a tool call. At most `limit` (1-20)."""
        scope = self._acting.scope
        return self._editing.suggest_documents(query, limit, scope, self._catalogue.readable_ids(scope))

    # -- uploads ---------------------------------------------------------------------------------------------
    def preview_upload(self, file_name: str, data: bytes, category: str) -> UploadPreview:
        """What an upload of this file would do and what the lint finds; writes nothing."""
        return preview_upload(self._parts.index, file_name, data, category)

    def preview_batch(self, files: Sequence[BatchFile], category: str, *,
                      duplicates_anyway: bool = False) -> BatchPreview:
        """Per-file verdicts, same-target files, clashes within the batch and content indexed elsewhere
        (`DUPLICATE` unless `duplicates_anyway`); writes nothing."""
        return preview_batch(self._parts.index, files, category,
                             paths_with_content=self._parts.metadata.paths_with_content,
                             duplicates_anyway=duplicates_anyway)

    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress | None = None,
               if_match: str | None = None, create_only: bool = False) -> UploadOutcome:
        """`if_match`: the sha256 of the version this replaces (`DocumentRecord.content_sha256`); `create_only`:
        the document must not exist yet. Otherwise `DocumentConflictError`, writing nothing. Curators only."""
        with self._acting.writing(Role.CURATOR, "upload documents", "upload"):
            return self._parts.documents.upload(file_name, data, category, if_match=if_match,
                                                create_only=create_only, **_p(progress))

    # -- editing in place --------------------------------------------------------------------------------------
    def prepare_edit(self, file_path: str, *, title: str | None = None, summary: str | None = None,
                     keywords: Sequence[str] | None = None,
                     sections: Mapping[str, str] | Sequence[tuple[str, str]] | None = None) -> FrontmatterEdit:
        """The document rewritten with new values of the given fields (None: left alone; `sections` as a mapping
        or (name, heading line) pairs, emptied: the key is removed), every other byte as it was, with the upload
        preview, the lint and a diff of the frontmatter. Writes nothing. A value the file cannot hold, or a block
        that is not valid YAML, raises `FrontmatterError`; a path that is no document's, `UploadRejected`.
        Curators only."""
        self._acting.require(Role.CURATOR, "edit documents")
        self._check_readable(file_path)
        return self._editing.prepare(file_path, title=title, summary=summary, keywords=keywords, sections=sections)

    def save_edit(self, edit: FrontmatterEdit, *, progress: Progress | None = None) -> UploadOutcome:
        """Write a prepared edit through the upload path (every store), unless the file changed since it was
        prepared: then `EditConflictError` (a `DocumentConflictError`), writing nothing. Curators only."""
        self._acting.require(Role.CURATOR, "edit documents")
        return self._editing.save(edit, self.upload, progress)

    # -- deletes and maintenance -------------------------------------------------------------------------------
    def delete(self, doc_id: int) -> DeleteOutcome:
        """Move a document's file into the trash (`kb.trash`, for `KB_TRASH_DAYS` days) and remove its row,
        vectors and L0 entry. Curators only."""
        with self._acting.writing(Role.CURATOR, "delete documents", "delete"):
            if self._acting.limited and self.get(doc_id) is None:  # the answer for an id that does not exist
                return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
            return self._parts.documents.delete(doc_id)

    def reindex(self, doc_id: int, *, progress: Progress | None = None) -> DocumentRecord:
        """Chunk and embed one document again from its file. Admins only."""
        with self._acting.writing(Role.ADMIN, "re-index documents", "reindex"):
            self._check_id(doc_id)
            return self._parts.documents.reindex(doc_id, **_p(progress))

    def reindex_all(self, *, progress: Progress | None = None) -> ReindexReport:
        """Every document again (after a model change; `kb reindex`). Admins only."""
        with self._acting.writing(Role.ADMIN, "re-index documents", "reindex_all"):
            return self._parts.documents.reindex_all(**_p(progress))

    def reconcile(self, paths: Iterable[str | os.PathLike[str]] | None = None, *, delete_missing: bool = False,
                  progress: Progress | None = None) -> ReconcileReport:
        """Bring disk, database, Milvus and L0 into agreement (`kb_core.documents.reconcile`); rows whose file
        has gone are reported, or removed with `delete_missing`; `paths` limits it to those files or folders.
        Admins only."""
        with self._acting.writing(Role.ADMIN, "reconcile the knowledge base", "reconcile"):
            return self._parts.reconciler.reconcile(paths, delete_missing=delete_missing, **_p(progress))

    def _check_id(self, doc_id: int) -> None:
        """A document the actor may not read does not exist for it: the same answer as for a missing id."""
        if self._acting.limited and self.get(doc_id) is None:
            raise DocumentError("reindex", f"document {doc_id} does not exist")

    def _check_readable(self, file_path: Any) -> None:
        self._acting.check_readable(file_path)


def _p(progress: Progress | None) -> dict:
    return {} if progress is None else {"progress": progress}

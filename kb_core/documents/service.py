"""Upload, delete, re-index and sync, so that disk, database, Milvus and L0 never disagree (Specs 2, 8).

Everything that can fail without side effects (validation, parsing, chunking, embedding) runs before the
first write. The writes then go file -> database row (uncommitted) -> Milvus -> commit -> L0, and a failure
undoes the earlier steps in reverse (decision D5): the previous file bytes and vectors are kept in memory
for that. Deletion goes vectors -> file -> L0 -> row, so a failure part-way leaves a row that a retry
finds and finishes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kb_core.documents.chunking import FRONTMATTER_HEADING, Chunk, chunk_markdown
from kb_core.documents.frontmatter import Frontmatter, parse_frontmatter_strict
from kb_core.documents.validation import decode_markdown, validate_category, validate_file_name
from kb_core.errors import DocumentError, FrontmatterError, KnowledgeBaseError, UploadRejected
from kb_core.progress import Progress, no_progress
from kb_core.retrieval.keyword_index import KnowledgeEntry, KnowledgeIndex
from kb_core.storage.db_models import DocumentStatus
from kb_core.storage.metadata_store import DocumentRecord, DocumentValues
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder, MetadataRepository
from kb_core.storage.vector_store import FULLTEXT_PROFILE

log = logging.getLogger(__name__)

__all__ = ["DeleteOutcome", "DocumentError", "DocumentService", "Progress", "ReindexReport", "SyncReport",
           "UploadOutcome"]

@dataclass(frozen=True)
class UploadOutcome:
    action: str  # "indexed" | "replaced" | "unchanged"
    document: DocumentRecord
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeleteOutcome:
    deleted: bool
    file_path: str | None
    message: str


@dataclass(frozen=True)
class SyncReport:
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    missing_files: tuple[str, ...] = ()  # rows whose file has gone from disk


@dataclass(frozen=True)
class ReindexReport:
    reindexed: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PreparedDocument:
    """Everything computed before the first write."""

    text: str
    frontmatter: Frontmatter | None
    frontmatter_problem: str | None
    chunks: list[Chunk]
    texts: list[str]  # what BM25 indexes and the embedder sees, one per chunk
    vectors: list[list[float]] | None
    warnings: tuple[str, ...] = field(default_factory=tuple)


def header_text(fm: Frontmatter) -> str:
    """The frontmatter as a searchable chunk: a third of real keywords appear nowhere in the body."""
    lines = [fm.title, fm.summary]
    if fm.keywords:
        lines.append("keywords: " + ", ".join(fm.keywords))
    return "\n".join(line for line in lines if line)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(target: Path, data: bytes) -> None:
    """Temp file in the same directory + fsync + rename: readers see the old or the new file, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:50]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class DocumentService:
    def __init__(
        self,
        index: KnowledgeIndex,
        metadata: MetadataRepository,
        vectors: ChunkStore,
        embedder: Embedder | None,
        *,
        max_upload_bytes: int,
    ):
        self._index = index
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder if vectors.has_dense else None
        self._max_upload_bytes = max_upload_bytes
        # One writer at a time per process: the rollback of one upload must not undo another's work.
        self._write_lock = threading.RLock()

    @property
    def profile(self) -> str:
        """What produced the vectors: the model id, or "fulltext" when the collection has no dense field."""
        return self._embedder.model_id if self._embedder is not None else FULLTEXT_PROFILE

    # -- preparing -----------------------------------------------------------------------------------
    def prepare(self, text: str, *, source: str, progress: Progress = no_progress) -> PreparedDocument:
        progress("parsing", 0, 1)
        warnings: list[str] = []
        problem = None
        try:
            fm = parse_frontmatter_strict(text)
            if fm is None:
                problem = "no frontmatter"
                warnings.append("no frontmatter: L0 will not know this document; only L1 can find it")
        except FrontmatterError as exc:
            fm, problem = None, str(exc)
            log.warning("ignoring frontmatter in %s: %s", source, exc)
            warnings.append(f"frontmatter ignored ({exc}): only L1 can find this document")
        except Exception as exc:  # noqa: BLE001 - the parser's contract is "never raise"; keep uploads alive
            fm, problem = None, f"{type(exc).__name__}: {exc}"
            warnings.append(f"frontmatter ignored ({problem})")
        progress("chunking", 0, 1)
        chunks = chunk_markdown(text)
        title = fm.title if fm else ""
        texts = [c.embedding_text(title) for c in chunks]
        if fm is not None and header_text(fm):
            chunks = [Chunk(0, (FRONTMATTER_HEADING,), header_text(fm)),
                      *(Chunk(c.chunk_no + 1, c.heading_path, c.text) for c in chunks)]
            texts = [chunks[0].text] + texts
        if not chunks:
            raise UploadRejected(f"{source} has no text to index")
        vectors = None
        if self._embedder is not None:
            progress("embedding", 0, len(texts))
            try:
                vectors = self._embedder.encode_documents(texts, progress=progress)
            except Exception as exc:  # noqa: BLE001
                raise DocumentError("embedding", f"{type(exc).__name__}: {exc}") from exc
        return PreparedDocument(text, fm, problem, chunks, texts, vectors, tuple(warnings))

    # -- upload --------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress = no_progress) -> UploadOutcome:
        name = validate_file_name(file_name)
        category = validate_category(category)
        text = decode_markdown(data, max_bytes=self._max_upload_bytes, file_name=name)
        relative = f"{category}/{name}"
        file_path = self._index.display_path(relative)
        target = self._index.base_dir / category / name
        digest = sha256(bytes(data))
        with self._write_lock:
            existing = self._read_row(file_path)
            if existing is not None and self._is_current(existing, digest, target):
                progress("done", 1, 1)
                return UploadOutcome("unchanged", existing, ("identical to the indexed version: nothing to do",))
            prepared = self.prepare(text, source=file_path, progress=progress)
            record = self._store(file_path, name, category, bytes(data), digest, prepared, existing,
                                 write_file=target, progress=progress)
        action = "replaced" if existing is not None else "indexed"
        log.info("%s %s: %d chunks, model %s", action, file_path, record.chunk_count, record.embedding_model)
        progress("done", 1, 1)
        return UploadOutcome(action, record, prepared.warnings)

    def _is_current(self, row: DocumentRecord, digest: str, target: Path) -> bool:
        if row.content_sha256 != digest or row.status != DocumentStatus.INDEXED or row.embedding_model != self.profile:
            return False
        try:
            return sha256(target.read_bytes()) == digest
        except OSError:
            return False

    def _read_row(self, file_path: str) -> DocumentRecord | None:
        try:
            return self._metadata.get_by_path(file_path)
        except KnowledgeBaseError as exc:
            raise DocumentError("database", str(exc)) from exc

    def _store(
        self,
        file_path: str,
        name: str,
        category: str,
        data: bytes,
        digest: str,
        prepared: PreparedDocument,
        existing: DocumentRecord | None,
        *,
        write_file: Path | None,
        progress: Progress,
    ) -> DocumentRecord:
        """The write phase, undone in reverse on any failure."""
        old_bytes: bytes | None = None
        old_chunks: list[ChunkRow] = []
        step = "read the previous version"
        try:
            if write_file is not None and write_file.exists():
                old_bytes = write_file.read_bytes()
            if existing is not None:
                old_chunks = self._vectors.chunks_of(existing.id, with_vectors=True)
        except Exception as exc:  # noqa: BLE001
            raise DocumentError(step, f"{type(exc).__name__}: {exc}") from exc

        doc_id: int | None = None
        file_written = vectors_touched = False
        values = DocumentValues(
            file_name=name,
            category=category,
            file_path=file_path,
            status=DocumentStatus.INDEXED,
            metadata_json=(json.dumps(prepared.frontmatter.to_dict(), ensure_ascii=False)
                           if prepared.frontmatter else None),
            content_sha256=digest,
            size_bytes=len(data),
            chunk_count=len(prepared.chunks),
            embedding_model=self.profile,
            last_error=None,
        )
        try:
            if write_file is not None:
                step = "save file"
                progress("saving", 0, 1)
                write_atomic(write_file, data)
                file_written = True
            step = "database"
            with self._metadata.unit_of_work() as session:
                doc_id = self._metadata.stage_document(session, values, existing.id if existing else None)
                progress("indexing", 0, len(prepared.chunks))
                # Upsert by `{doc_id}:{chunk_no}` first, then drop chunks a longer old version had: a failed
                # write leaves the old vectors untouched. A new document has nothing to keep, so any
                # partial write is simply deleted on the way out.
                vectors_touched = existing is None
                step = "write vectors"
                self._vectors.upsert(self._rows(doc_id, file_path, category, prepared))
                vectors_touched = True
                if len(old_chunks) > len(prepared.chunks):
                    step = "delete stale vectors"
                    self._vectors.delete_chunks_from(doc_id, len(prepared.chunks))
                step = "database commit"
            progress("indexing", len(prepared.chunks), len(prepared.chunks))
        except Exception as exc:  # noqa: BLE001 - whatever failed, undo and report the step
            undo_problems = self._undo(doc_id if vectors_touched else None, old_chunks, len(prepared.chunks),
                                       write_file if file_written else None, old_bytes)
            message = f"{type(exc).__name__}: {exc}"
            if undo_problems:
                message += "; and the rollback was incomplete (" + "; ".join(undo_problems) + "): run sync"
            log.error("storing %s failed at %s: %s", file_path, step, message)
            raise DocumentError(step, message) from exc

        self._update_l0(file_path, prepared.frontmatter, category)
        record = self._metadata.get(doc_id) if doc_id is not None else None
        if record is None:  # pragma: no cover - committed just above
            raise DocumentError("database", f"the row of {file_path} vanished after commit")
        return record

    def _undo(self, doc_id: int | None, old_chunks: list[ChunkRow], new_count: int, written: Path | None,
              old_bytes: bytes | None) -> list[str]:
        problems: list[str] = []
        if doc_id is not None:
            try:
                if not old_chunks:
                    self._vectors.delete_document(doc_id)
                else:
                    self._vectors.upsert(old_chunks)
                    if new_count > len(old_chunks):
                        self._vectors.delete_chunks_from(doc_id, len(old_chunks))
            except Exception as exc:  # noqa: BLE001
                problems.append(f"vectors of document {doc_id}: {exc}")
        if written is not None:
            try:
                if old_bytes is None:
                    written.unlink(missing_ok=True)
                else:
                    write_atomic(written, old_bytes)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"file {written}: {exc}")
        for problem in problems:
            log.error("rollback incomplete: %s", problem)
        return problems

    def _rows(self, doc_id: int, file_path: str, category: str, prepared: PreparedDocument) -> list[ChunkRow]:
        vectors = prepared.vectors or [None] * len(prepared.chunks)
        return [
            ChunkRow(doc_id=doc_id, source=file_path, category=category, chunk_no=chunk.chunk_no,
                     heading=chunk.heading, text=text, dense=vector)
            for chunk, text, vector in zip(prepared.chunks, prepared.texts, vectors, strict=True)
        ]

    def _update_l0(self, file_path: str, fm: Frontmatter | None, category: str) -> None:
        if fm is not None:
            self._index.add(KnowledgeEntry.from_frontmatter(file_path, fm, category))
        else:
            self._index.remove(file_path)

    # -- delete --------------------------------------------------------------------------------------
    def delete(self, doc_id: int) -> DeleteOutcome:
        with self._write_lock:
            try:
                row = self._metadata.get(doc_id)
            except KnowledgeBaseError as exc:
                raise DocumentError("database", str(exc)) from exc
            if row is None:
                return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
            try:
                self._vectors.delete_document(doc_id)
            except Exception as exc:  # noqa: BLE001
                raise DocumentError("delete vectors", f"{exc}; nothing was deleted, try again") from exc
            real = self._index.resolve(row.file_path)
            try:
                if real is not None:
                    real.unlink(missing_ok=True)
            except OSError as exc:
                self._mark_incomplete(doc_id, f"deletion incomplete: the file could not be removed ({exc})")
                raise DocumentError("delete file", f"{exc}; the vectors are gone, delete again to finish") from exc
            self._index.remove(row.file_path)
            try:
                self._metadata.delete_document(doc_id)
            except KnowledgeBaseError as exc:
                raise DocumentError("delete row", f"{exc}; file and vectors are gone, delete again to finish") from exc
        log.info("deleted document %d (%s)", doc_id, row.file_path)
        return DeleteOutcome(True, row.file_path, f"deleted {row.file_path}")

    def _mark_incomplete(self, doc_id: int, message: str) -> None:
        try:
            self._metadata.set_status(doc_id, DocumentStatus.FAILED, message)
        except KnowledgeBaseError as exc:
            log.error("could not record the failed deletion of %d: %s", doc_id, exc)

    # -- re-index and sync ---------------------------------------------------------------------------
    def reindex(self, doc_id: int, *, progress: Progress = no_progress) -> DocumentRecord:
        """Re-parse, re-chunk and re-embed a document from its saved file (e.g. after a model change)."""
        with self._write_lock:
            row = self._metadata.get(doc_id)
            if row is None:
                raise DocumentError("reindex", f"document {doc_id} does not exist")
            return self._index_from_disk(row.file_path, row, progress)

    def reindex_all(self, *, progress: Progress = no_progress) -> ReindexReport:
        rows = self._metadata.list_documents()
        done: list[str] = []
        failed: list[tuple[str, str]] = []
        for i, row in enumerate(rows):
            progress("reindexing", i, len(rows))
            try:
                self.reindex(row.id)
                done.append(row.file_path)
            except KnowledgeBaseError as exc:
                failed.append((row.file_path, str(exc)))
        progress("done", len(rows), len(rows))
        return ReindexReport(tuple(done), tuple(failed))

    def _index_from_disk(self, file_path: str, existing: DocumentRecord | None, progress: Progress) -> DocumentRecord:
        real = self._index.resolve(file_path)
        if real is None or not real.is_file():
            raise DocumentError("read file", f"{file_path} is not on disk")
        relative = self._index.relative_path(file_path) or ""
        parts = relative.split("/")
        if len(parts) != 2:
            raise UploadRejected(f"{file_path} is not at <category>/<file>.md under the knowledge base")
        category, name = validate_category(parts[0]), validate_file_name(parts[1])
        data = real.read_bytes()
        text = decode_markdown(data, max_bytes=max(self._max_upload_bytes, len(data)), file_name=file_path)
        prepared = self.prepare(text, source=file_path, progress=progress)
        return self._store(file_path, name, category, data, sha256(data), prepared, existing, write_file=None,
                           progress=progress)

    def sync(self, *, progress: Progress = no_progress) -> SyncReport:
        """Index `.md` files placed under the knowledge base by hand; report rows whose file has gone."""
        rows = {r.file_path: r for r in self._metadata.list_documents()}
        on_disk = [self._index.display_path(rel) for rel in self._index.markdown_files()]
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        failed: list[tuple[str, str]] = []
        with self._index.bulk():  # one L0 rebuild for the whole batch, not one per file
            self._sync_files(on_disk, rows, added, updated, unchanged, failed, progress)
        missing = tuple(sorted(set(rows) - set(on_disk)))
        self._index.load()  # L0 follows the disk, in scan order
        progress("done", len(on_disk), len(on_disk))
        log.info("sync: %d added, %d updated, %d unchanged, %d failed, %d rows without a file",
                 len(added), len(updated), len(unchanged), len(failed), len(missing))
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged), tuple(failed), missing)

    def _sync_files(self, on_disk: list[str], rows: dict[str, DocumentRecord], added: list[str],
                    updated: list[str], unchanged: list[str], failed: list[tuple[str, str]],
                    progress: Progress) -> None:
        for i, file_path in enumerate(on_disk):
            progress("syncing", i, len(on_disk))
            row = rows.get(file_path)
            real = self._index.resolve(file_path)
            try:
                if row is not None and real is not None and self._is_current(row, sha256(real.read_bytes()), real):
                    unchanged.append(file_path)
                    continue
                with self._write_lock:
                    self._index_from_disk(file_path, row, no_progress)
                (updated if row is not None else added).append(file_path)
            except (KnowledgeBaseError, OSError) as exc:
                failed.append((file_path, str(exc)))
                log.warning("sync could not index %s: %s", file_path, exc)

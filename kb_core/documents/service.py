"""Upload, delete, re-index and sync, so that disk, database, Milvus and L0 never disagree (Specs 2, 8).

Everything that can fail without side effects (validation, parsing, chunking, embedding) runs before the
first write. The writes then go file -> database row (uncommitted) -> Milvus -> commit -> L0, and a failure
undoes the earlier steps in reverse (decision D5): the previous file bytes and vectors are kept in memory
for that. Deletion goes vectors -> file -> L0 -> row, so a failure part-way leaves a row that a retry
finds and finishes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from kb_core.documents.chunking import FRONTMATTER_HEADING, Chunk, chunk_markdown
from kb_core.documents.frontmatter import Frontmatter, parse_frontmatter_strict
from kb_core.documents.validation import decode_markdown, validate_category, validate_file_name
from kb_core.errors import DocumentConflictError, DocumentError, FrontmatterError, KnowledgeBaseError, UploadRejected
from kb_core.progress import Progress, no_progress
from kb_core.retrieval.keyword_index import KnowledgeEntry, KnowledgeIndex
from kb_core.storage.db_models import DocumentStatus
from kb_core.storage.metadata_store import DocumentRecord, DocumentValues
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder, MetadataRepository
from kb_core.storage.vector_store import FULLTEXT_PROFILE

log = logging.getLogger(__name__)

__all__ = ["DeleteOutcome", "DocumentError", "DocumentService", "Progress", "RecoveryReport", "ReindexReport",
           "RemovalReport", "RepairReport", "SyncReport",
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
    removed: tuple[str, ...] = ()  # rows (and vectors) deleted because their file was deleted (`sync_paths`)


@dataclass(frozen=True)
class RecoveryReport:
    finished: tuple[str, ...] = ()  # interrupted uploads completed from the file on disk
    undone: tuple[str, ...] = ()  # interrupted uploads without a file, and interrupted deletes, completed
    left_to_live_writers: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    temp_files_removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepairReport:
    recovery: RecoveryReport
    orphan_documents: tuple[int, ...] = ()  # document ids whose vectors had no row (deleted)
    trimmed: tuple[str, ...] = ()  # documents with vectors beyond their chunk count (deleted)
    reindexed: tuple[str, ...] = ()  # documents with fewer vectors than chunks (re-indexed)
    missing_files: tuple[str, ...] = ()  # rows whose file has gone (delete them with delete_missing=True)
    deleted: tuple[str, ...] = ()
    sync: SyncReport | None = None
    failed: tuple[tuple[str, str], ...] = ()

    def summary(self) -> str:
        parts = [f"{len(self.recovery.finished) + len(self.recovery.undone)} interrupted writes completed",
                 f"{len(self.orphan_documents)} orphan documents' vectors deleted",
                 f"{len(self.trimmed)} documents' stale chunks deleted",
                 f"{len(self.reindexed)} documents re-indexed",
                 f"{len(self.missing_files)} rows without a file", f"{len(self.deleted)} deleted"]
        if self.sync is not None:
            parts.append(f"{len(self.sync.added)} files added, {len(self.sync.updated)} updated")
        if self.failed or (self.sync and self.sync.failed):
            parts.append(f"{len(self.failed) + len(self.sync.failed if self.sync else ())} failed")
        return "; ".join(parts)


@dataclass(frozen=True)
class ReindexReport:
    reindexed: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RemovalReport:
    removed: tuple[str, ...] = ()
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
    dense_missing: bool = False  # the model was not ready: indexed for full text only, re-index fills it in


def header_text(fm: Frontmatter) -> str:
    """The frontmatter as a searchable chunk: a third of real keywords appear nowhere in the body. The first
    line is always the title (empty when there is none): L1's title ranking reads it there."""
    lines = [line for line in (fm.summary, "keywords: " + ", ".join(fm.keywords) if fm.keywords else "") if line]
    if not fm.title and not lines:
        return ""
    return "\n".join([fm.title, *lines])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(target: Path, data: bytes) -> None:
    """Temp file in the same directory + fsync + rename: readers see the old or the new file, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid is in the name: a temp file whose writer died is removed by `recover`
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:50]}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_TEMP_NAME = re.compile(r"^\..*\.(\d+)\.[^.]+\.tmp$")
DENSE_MISSING = "dense vectors missing: the model was not ready; re-index or repair adds them"
def new_owner() -> str:
    """Who writes, recorded with every PENDING row: "host:pid:token", one token per document service, made
    when the service is (after any fork), so a restart can tell a crashed writer from a live one."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_gone(owner: str | None, own: str) -> bool:
    """True when the writer that left a row PENDING is certainly not writing it any more: a dead process on
    this host, or this very service (the caller holds its write lock, so none of its writes is in flight).
    Rows of live writers elsewhere (another host, another live process or service) are left to them."""
    if not owner or owner == own:
        return True
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname():
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if pid == os.getpid():
        return False  # another service in this process: it recovers its own rows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _undo_file(path: Path, ours: bytes, old: bytes | None) -> None:
    """Put back what was there, but only over our own bytes: a file someone else wrote since is theirs."""
    try:
        current = path.read_bytes()
    except FileNotFoundError:
        current = None
    if current is not None and sha256(current) != sha256(ours):
        log.warning("not undoing %s: its content is no longer what this write put there", path)
        return
    if old is not None:
        write_atomic(path, old)
    else:
        path.unlink(missing_ok=True)


def _values_of(record: DocumentRecord) -> DocumentValues:
    return DocumentValues(**{f.name: getattr(record, f.name) for f in fields(DocumentValues)})


def _run_undos(undo: list[tuple[str, Callable[[], None]]]) -> list[str]:
    problems: list[str] = []
    for what, action in reversed(undo):
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - keep undoing the rest; report what could not be undone
            problems.append(f"{what}: {exc}")
            log.error("rollback incomplete: %s: %s", what, exc)
    return problems


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
        self._held: set[str] = set()  # paths whose database lock this service holds (under _write_lock)
        self._owner = new_owner()

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
        dense_missing = False
        if self._embedder is not None:
            state = self._embedder.state
            if not state.ready:
                # The model never blocks a write: still loading, or failed to load, the document goes in for
                # full-text search now and `reindex` / `repair` add its dense vectors once the model is ready.
                dense_missing = True
                warnings.append(f"the embedding model is {state.state}: indexed for full-text search only; "
                                "re-index (or repair) adds the dense vectors when the model is ready")
            else:
                progress("embedding", 0, len(texts))
                try:
                    vectors = self._embedder.encode_documents(texts, progress=progress)
                except Exception as exc:  # noqa: BLE001
                    raise DocumentError("embedding", f"{type(exc).__name__}: {exc}") from exc
        return PreparedDocument(text, fm, problem, chunks, texts, vectors, tuple(warnings), dense_missing)

    # -- upload --------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress = no_progress,
               if_match: str | None = None) -> UploadOutcome:
        """Index a file as `<category>/<name>`, replacing what is there. With `if_match` (the sha256 of the version
        the caller based this on, as `content_sha256` or the upload preview shows it) the upload is a replace
        that only happens while that version is still the current one: checked under the document's lock, so
        a concurrent writer in any process cannot slip in between; otherwise `DocumentConflictError`."""
        name = validate_file_name(file_name)
        category = validate_category(category)
        text = decode_markdown(data, max_bytes=self._max_upload_bytes, file_name=name)
        relative = f"{category}/{name}"
        file_path = self._index.display_path(relative)
        target = self._index.base_dir / category / name
        folder = target.parent
        if (folder.exists() or folder.is_symlink()) and not self._index.is_inside(folder):
            raise UploadRejected(f"the category folder {category}/ is a link leading outside the knowledge base; "
                                 "nothing is written there")
        if target.is_symlink():
            raise UploadRejected(f"{file_path} is a link; replace the file it points to instead")
        digest = sha256(bytes(data))
        if if_match is not None:
            if not re.fullmatch(r"[0-9a-f]{64}", if_match):
                raise UploadRejected(f"if_match must be a document's sha256 (64 hex digits, as "
                                     f"DocumentRecord.content_sha256), not {if_match[:80]!r}; nothing was written")
            self._check_version(file_path, target, if_match)  # early, before minutes of embedding; again below
        existing = self._read_row(file_path)
        if existing is not None and self._is_current(existing, digest, target):
            progress("done", 1, 1)
            return UploadOutcome("unchanged", existing, ("identical to the indexed version: nothing to do",))
        # Parsing, chunking and embedding (seconds to minutes for a big document) run before the write lock:
        # other uploads, deletes and re-indexes do not wait for them.
        prepared = self.prepare(text, source=file_path, progress=progress)
        with self._locked(file_path):
            if if_match is not None:
                self._check_version(file_path, target, if_match)
            existing = self._read_row(file_path)  # again: another writer may have been faster
            if existing is not None and self._is_current(existing, digest, target):
                progress("done", 1, 1)
                return UploadOutcome("unchanged", existing, ("identical to the indexed version: nothing to do",))
            record = self._store(file_path, name, category, bytes(data), digest, prepared, existing,
                                 write_file=target, progress=progress)
        action = "replaced" if existing is not None else "indexed"
        log.info("%s %s: %d chunks, model %s", action, file_path, record.chunk_count, record.embedding_model)
        progress("done", 1, 1)
        return UploadOutcome(action, record, prepared.warnings)

    def _check_version(self, file_path: str, target: Path, expected: str) -> None:
        """The current version is the file on disk: it is what the write would overwrite (after a sync it is
        the row's `content_sha256` too). A row whose file is gone counts as gone."""
        try:
            current = sha256(target.read_bytes()) if target.is_file() else None
        except OSError as exc:
            raise DocumentError("read the current version", str(exc)) from exc
        if current != expected.strip().lower():
            log.warning("upload of %s refused: based on %s, current %s", file_path, expected[:12], current)
            raise DocumentConflictError(file_path, expected, current)

    def _is_current(self, row: DocumentRecord, digest: str, target: Path) -> bool:
        if row.content_sha256 != digest or row.status != DocumentStatus.INDEXED:
            return False
        if row.embedding_model != self.profile and not (row.last_error == DENSE_MISSING and not self._dense_ready()):
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
        """The write phase: intent record (row PENDING) -> file -> vectors -> row INDEXED -> L0.

        Each step pushes its undo before it starts; any exception — including `BaseException`s such as a
        Streamlit rerun raised from a progress callback — runs the undos in reverse and is re-raised. A crash
        (kill -9) leaves the row PENDING, which the next opening (`recover`) finishes or undoes.
        """
        step = "read the previous version"
        try:
            old_bytes = write_file.read_bytes() if write_file is not None and write_file.exists() else None
            old_chunks = self._vectors.chunks_of(existing.id, with_vectors=True) if existing is not None else []
        except Exception as exc:  # noqa: BLE001
            raise DocumentError(step, f"{type(exc).__name__}: {exc}") from exc

        values = DocumentValues(
            file_name=name,
            category=category,
            file_path=file_path,
            status=DocumentStatus.PENDING,
            metadata_json=(json.dumps(prepared.frontmatter.to_dict(), ensure_ascii=False)
                           if prepared.frontmatter else None),
            content_sha256=digest,
            size_bytes=len(data),
            chunk_count=len(prepared.chunks),
            embedding_model=FULLTEXT_PROFILE if prepared.dense_missing else self.profile,
            last_error=DENSE_MISSING if prepared.dense_missing else None,
        )
        undo: list[tuple[str, Callable[[], None]]] = []
        doc_id: int | None = existing.id if existing is not None else None
        try:
            step = "database"
            doc_id = self._metadata.save_document(values, doc_id, pending=("upload", self._owner))
            if existing is None:
                undo.append(("row", lambda: self._metadata.delete_document(doc_id)))
            else:
                undo.append(("row", lambda: self._metadata.save_document(_values_of(existing), existing.id)))
            if write_file is not None:
                step = "save file"
                progress("saving", 0, 1)
                undo.append(("file", lambda: _undo_file(write_file, data, old_bytes)))
                write_atomic(write_file, data)
            step = "write vectors"
            progress("indexing", 0, len(prepared.chunks))
            # Upsert by `{doc_id}:{chunk_no}` first, then drop chunks a longer old version had: a failed write
            # leaves the old vectors untouched. The undo is pushed first: a write can fail half-way.
            undo.append(("vectors", lambda: self._restore_vectors(doc_id, old_chunks, len(prepared.chunks))))
            self._vectors.upsert(self._rows(doc_id, file_path, category, prepared))
            if len(old_chunks) > len(prepared.chunks):
                step = "delete stale vectors"
                self._vectors.delete_chunks_from(doc_id, len(prepared.chunks))
            step = "database commit"
            progress("indexing", len(prepared.chunks), len(prepared.chunks))
            self._metadata.finish_write(doc_id, last_error=values.last_error)
        except BaseException as exc:  # noqa: BLE001 - whatever failed or interrupted: undo, then re-raise
            problems = _run_undos(undo)
            message = f"{type(exc).__name__}: {exc}"
            if problems:
                message += "; and the rollback was incomplete (" + "; ".join(problems) + "): run repair"
            log.error("storing %s failed at %s: %s", file_path, step, message)
            if not isinstance(exc, Exception):
                raise
            raise DocumentError(step, message) from exc

        self._update_l0(file_path, prepared.frontmatter, category, prepared.text)
        record = self._metadata.get(doc_id) if doc_id is not None else None
        if record is None:  # pragma: no cover - committed just above
            raise DocumentError("database", f"the row of {file_path} vanished after commit")
        return record

    @contextlib.contextmanager
    def _locked(self, file_path: str) -> Iterator[None]:
        """This process's write lock, then the document's lock in the database: two processes writing the same
        path take turns, and each sees what the other committed."""
        with self._write_lock, contextlib.ExitStack() as stack:
            # re-entrant, like the process lock: recovery re-indexes under the lock it already holds, and the
            # database locks would wait for themselves (another connection, another open file description)
            if file_path not in self._held:
                try:
                    stack.enter_context(self._metadata.document_lock(file_path))
                except KnowledgeBaseError as exc:
                    raise DocumentError("lock", str(exc)) from exc
                self._held.add(file_path)
                stack.callback(self._held.discard, file_path)
            yield

    def _dense_ready(self) -> bool:
        return self._embedder is not None and self._embedder.state.ready

    def _restore_vectors(self, doc_id: int | None, old_chunks: list[ChunkRow], new_count: int) -> None:
        if doc_id is None:
            return
        if not old_chunks:
            self._vectors.delete_document(doc_id)
            return
        self._vectors.upsert(old_chunks)
        if new_count > len(old_chunks):
            self._vectors.delete_chunks_from(doc_id, len(old_chunks))

    def _rows(self, doc_id: int, file_path: str, category: str, prepared: PreparedDocument) -> list[ChunkRow]:
        vectors: list[list[float] | None] = list(prepared.vectors or [None] * len(prepared.chunks))
        if prepared.vectors is None and self._vectors.dense_dim:
            # The collection requires a dense vector per chunk. A fixed axis vector stands in until re-index:
            # its cosine with any real query is about 1/sqrt(dim), far below the dense relevance threshold.
            placeholder = [1.0] + [0.0] * (self._vectors.dense_dim - 1)
            vectors = [placeholder] * len(prepared.chunks)
        return [
            ChunkRow(doc_id=doc_id, source=file_path, category=category, chunk_no=chunk.chunk_no,
                     heading=chunk.heading, text=text, dense=vector)
            for chunk, text, vector in zip(prepared.chunks, prepared.texts, vectors, strict=True)
        ]

    def _update_l0(self, file_path: str, fm: Frontmatter | None, category: str, text: str) -> None:
        if fm is not None:
            self._index.add(KnowledgeEntry.from_frontmatter(file_path, fm, category, text))
        else:
            self._index.remove(file_path)

    # -- delete --------------------------------------------------------------------------------------
    def delete(self, doc_id: int) -> DeleteOutcome:
        """Intent record first (row PENDING "delete"), then vectors -> file -> L0 -> row. A failure or a crash
        part-way leaves the row marked, and deleting again (or opening the knowledge base) finishes it."""
        try:
            row = self._metadata.get(doc_id)
        except KnowledgeBaseError as exc:
            raise DocumentError("database", f"{exc}; nothing was deleted") from exc
        if row is None:
            return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
        with self._locked(row.file_path):
            try:
                row = self._metadata.get(doc_id)  # again, under the locks
                if row is None:
                    return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
                self._metadata.set_pending(doc_id, "delete", self._owner)
            except KnowledgeBaseError as exc:
                raise DocumentError("database", f"{exc}; nothing was deleted") from exc
            self._finish_delete(row)
        log.info("deleted document %d (%s)", doc_id, row.file_path)
        return DeleteOutcome(True, row.file_path, f"deleted {row.file_path}")

    def _finish_delete(self, row: DocumentRecord) -> None:
        try:
            self._vectors.delete_document(row.id)
        except Exception as exc:  # noqa: BLE001
            raise DocumentError("delete vectors", f"{exc}; the document is marked for deletion: delete it again "
                                                  "(or reopen / repair) to finish") from exc
        # the path itself, never where a link points: deleting removes the link, not a file elsewhere
        real = self._index.lexical_path(row.file_path)
        try:
            if real is not None:
                real.unlink(missing_ok=True)
        except OSError as exc:
            self._mark_incomplete(row.id, f"deletion incomplete: the file could not be removed ({exc})")
            raise DocumentError("delete file", f"{exc}; the vectors are gone, delete again to finish") from exc
        self._index.remove(row.file_path)
        try:
            self._metadata.delete_document(row.id)
        except KnowledgeBaseError as exc:
            raise DocumentError("delete row", f"{exc}; file and vectors are gone, delete again to finish") from exc

    def _mark_incomplete(self, doc_id: int, message: str) -> None:
        try:
            self._metadata.set_status(doc_id, DocumentStatus.FAILED, message)
        except KnowledgeBaseError as exc:
            log.error("could not record the failed deletion of %d: %s", doc_id, exc)

    # -- crash recovery --------------------------------------------------------------------------------
    def recover(self) -> RecoveryReport:
        """Finish or undo what a crashed writer left PENDING, and remove its stray temp files. Cheap: it
        reads only the pending rows. Rows a live writer (another process) is working on are left alone."""
        report = self._recover_rows(self._metadata.pending_documents())
        removed = self._remove_stray_temp_files()
        if report.finished or report.undone or report.failed or removed:
            log.warning("recovered interrupted writes: %d finished, %d undone, %d failed, %d temp files removed",
                        len(report.finished), len(report.undone), len(report.failed), len(removed))
        return dataclasses.replace(report, temp_files_removed=tuple(removed))

    def recover_dead_writers(self) -> RecoveryReport:
        """For a process that keeps running: finish or undo the rows of writers (other processes on this host)
        that died since it opened. Rows of live writers, and this service's own (a thread of it may be writing
        them right now), are not touched, so this never waits on a lock. Cheap: it reads only pending rows."""
        rows = [row for row in self._metadata.pending_documents()
                if row.pending_owner != self._owner and owner_is_gone(row.pending_owner, self._owner)]
        if not rows:
            return RecoveryReport()
        report = self._recover_rows(rows)
        log.warning("recovered the writes of writers that died: %d finished, %d undone, %d failed",
                    len(report.finished), len(report.undone), len(report.failed))
        return report

    def _recover_rows(self, rows: Iterable[DocumentRecord]) -> RecoveryReport:
        finished: list[str] = []
        undone: list[str] = []
        left: list[str] = []
        failed: list[tuple[str, str]] = []
        for listed in rows:
            try:
                with self._locked(listed.file_path):
                    row = self._metadata.get(listed.id)  # again, under the lock: it may have settled meanwhile
                    if row is None or row.pending_operation is None:
                        continue
                    if not owner_is_gone(row.pending_owner, self._owner):
                        left.append(row.file_path)
                        continue
                    if row.pending_operation == "delete":
                        self._finish_delete(row)
                        undone.append(row.file_path)
                        continue
                    real = self._index.lexical_path(row.file_path)
                    if real is not None and real.is_file():
                        self._index_from_disk(row.file_path, row, no_progress)  # the file on disk wins
                        finished.append(row.file_path)
                    else:  # the file never arrived: the upload did not happen
                        self._vectors.delete_document(row.id)
                        self._index.remove(row.file_path)
                        self._metadata.delete_document(row.id)
                        undone.append(row.file_path)
            except (KnowledgeBaseError, OSError) as exc:
                failed.append((listed.file_path, str(exc)))
                log.error("could not recover the interrupted write of %s: %s", listed.file_path, exc)
        return RecoveryReport(tuple(finished), tuple(undone), tuple(left), tuple(failed))

    def _remove_stray_temp_files(self) -> list[str]:
        removed: list[str] = []
        base = self._index.base_dir
        if not base.is_dir():
            return removed
        for tmp in base.rglob(".*.tmp"):
            match = _TEMP_NAME.match(tmp.name)
            if match is None or int(match.group(1)) == os.getpid() \
                    or not owner_is_gone(f"{socket.gethostname()}:{match.group(1)}:", self._owner):
                continue
            try:
                tmp.unlink()
                removed.append(str(tmp))
            except OSError as exc:
                log.warning("cannot remove stray temp file %s: %s", tmp, exc)
        return removed

    # -- re-index and sync ---------------------------------------------------------------------------
    def reindex(self, doc_id: int, *, progress: Progress = no_progress) -> DocumentRecord:
        """Re-parse, re-chunk and re-embed a document from its saved file (e.g. after a model change)."""
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
        real = self._index.lexical_path(file_path)
        if real is None or not real.is_file():
            raise DocumentError("read file", f"{file_path} is not on disk")
        relative = self._index.relative_path(file_path) or ""
        parts = relative.split("/")
        if len(parts) != 2:
            raise UploadRejected(f"{file_path} is not at <category>/<file>.md under the knowledge base")
        category, name = validate_category(parts[0]), validate_file_name(parts[1])
        data = real.read_bytes()
        text = decode_markdown(data, max_bytes=max(self._max_upload_bytes, len(data)), file_name=file_path)
        prepared = self.prepare(text, source=file_path, progress=progress)  # outside the lock
        with self._locked(file_path):
            existing = self._metadata.get_by_path(file_path)  # the row as it is now, under the lock
            return self._store(file_path, name, category, data, sha256(data), prepared, existing,
                               write_file=None, progress=progress)

    def repair(self, *, delete_missing: bool = False, progress: Progress = no_progress) -> RepairReport:
        """One reconciliation of disk, database, Milvus and L0: finish interrupted writes; delete vectors
        whose row does not exist or whose chunk number is beyond the row's chunk count; re-index documents
        with missing vectors; index files without rows (sync); report rows whose file has gone (and delete
        them, with their vectors, when `delete_missing`); rebuild L0 under the write lock."""
        recovery = self.recover()
        progress("checking vectors", 0, 1)
        orphans: set[int] = set()
        trimmed: list[str] = []
        incomplete: list[DocumentRecord] = []
        with self._write_lock:
            rows = {r.id: r for r in self._metadata.list_documents()}
            per_doc: dict[int, tuple[int, int]] = {}  # doc id -> (chunks, highest chunk_no + 1)
            for doc_id, chunk_no in self._vectors.chunk_keys():
                count, top = per_doc.get(doc_id, (0, 0))
                per_doc[doc_id] = (count + 1, max(top, chunk_no + 1))
            for doc_id, (_count, top) in per_doc.items():
                row = rows.get(doc_id)
                if row is None:
                    orphans.add(doc_id)
                    self._vectors.delete_document(doc_id)
                elif top > row.chunk_count:
                    trimmed.append(row.file_path)
                    self._vectors.delete_chunks_from(doc_id, row.chunk_count)
            for doc_id, row in rows.items():
                count = min(per_doc.get(doc_id, (0, 0))[0], row.chunk_count)
                dense_to_fill = row.last_error == DENSE_MISSING and self._dense_ready()
                if (count < row.chunk_count or dense_to_fill) and row.pending_operation is None:
                    incomplete.append(row)
            missing = [r for r in rows.values()
                       if r.pending_operation is None and not ((p := self._index.lexical_path(r.file_path))
                                                               and p.is_file())]
        reindexed: list[str] = []
        failed: list[tuple[str, str]] = []
        for row in incomplete:
            if row in missing:
                continue
            try:
                self._index_from_disk(row.file_path, row, no_progress)
                reindexed.append(row.file_path)
            except (KnowledgeBaseError, OSError) as exc:
                failed.append((row.file_path, str(exc)))
        deleted: list[str] = []
        if delete_missing:
            for row in missing:
                try:
                    with self._locked(row.file_path):
                        self._metadata.set_pending(row.id, "delete", self._owner)
                        self._finish_delete(row)
                    deleted.append(row.file_path)
                except KnowledgeBaseError as exc:
                    failed.append((row.file_path, str(exc)))
        synced = self.sync(progress=progress)
        report = RepairReport(recovery=recovery, orphan_documents=tuple(sorted(orphans)),
                              trimmed=tuple(trimmed), reindexed=tuple(reindexed),
                              missing_files=tuple(r.file_path for r in missing if r.file_path not in deleted),
                              deleted=tuple(deleted), sync=synced, failed=tuple(failed))
        log.info("repair: %s", report.summary())
        return report

    def missing_files(self, rows: Sequence[DocumentRecord] | None = None) -> list[DocumentRecord]:
        """Documents (of `rows`, default all) whose file has gone from disk (deleted or moved by hand), not in the
        middle of a write."""
        rows = self._metadata.list_documents() if rows is None else rows
        return [r for r in rows if r.pending_operation is None and not self._on_disk(r)]

    def _on_disk(self, row: DocumentRecord) -> bool:
        path = self._index.lexical_path(row.file_path)
        return path is not None and path.is_file()

    def remove_missing(self) -> RemovalReport:
        """Delete the rows, vectors and L0 entries of documents whose file has gone (what `repair(delete_missing=
        True)` does, without the rest of a repair). A file that is back by the time its lock is held stays."""
        removed: list[str] = []
        failed: list[tuple[str, str]] = []
        for row in self.missing_files():
            try:
                with self._locked(row.file_path):
                    current = self._metadata.get(row.id)
                    if current is None or current.pending_operation is not None or self._on_disk(current):
                        continue
                    self._metadata.set_pending(row.id, "delete", self._owner)
                    self._finish_delete(current)
                removed.append(row.file_path)
            except KnowledgeBaseError as exc:
                failed.append((row.file_path, str(exc)))
        log.info("removed %d documents whose file had gone (%d failed)", len(removed), len(failed))
        return RemovalReport(tuple(removed), tuple(failed))

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
        with self._write_lock:  # a listing taken under the lock cannot miss a concurrent upload
            self._index.load()  # L0 follows the disk, in scan order
        progress("done", len(on_disk), len(on_disk))
        log.info("sync: %d added, %d updated, %d unchanged, %d failed, %d rows without a file",
                 len(added), len(updated), len(unchanged), len(failed), len(missing))
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged), tuple(failed), missing)

    def sync_paths(self, paths: Iterable[str | os.PathLike[str]]) -> SyncReport:
        """Sync just these paths (files or folders; absolute, or display paths like `knowledge_base/api`): index
        new and changed `.md` files, skip those whose content hash equals their row's, and delete the rows and
        vectors of files that are gone. The folder watcher's incremental sync. Files count by the scan's rules
        (`markdown_files`: hidden and temp files, links leading out, non-regular files are skipped) and only at
        `<category>/<file>.md`. A row whose path still exists but no longer counts (say, it became a link
        leading out) is reported in `missing_files`, never deleted: deleting would remove the user's link."""
        relatives = {rel for rel in (self._relative_of(p) for p in paths) if rel is not None}
        if not relatives:
            return SyncReport()
        whole = "" in relatives
        wanted = {self._index.display_path(rel) for rel in relatives}
        folders = tuple(path + "/" for path in wanted)

        def concerned(file_path: str) -> bool:
            return whole or file_path in wanted or file_path.startswith(folders)

        listed = {p for rel in self._index.markdown_files() if rel.count("/") == 1
                  and concerned(p := self._index.display_path(rel))}
        try:
            known = [r for r in self._metadata.list_documents() if concerned(r.file_path)]
        except KnowledgeBaseError as exc:
            raise DocumentError("database", f"{exc}; nothing was synced") from exc
        failed: list[tuple[str, str]] = []
        rows: dict[str, DocumentRecord] = {}
        on_disk: list[str] = []
        for file_path in sorted(listed):
            try:
                with self._locked(file_path):  # a write of this path in flight finishes first: no second embedding
                    row = self._metadata.get_by_path(file_path)
            except KnowledgeBaseError as exc:
                failed.append((file_path, str(exc)))
                continue
            on_disk.append(file_path)
            if row is not None:
                rows[file_path] = row
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        removed: list[str] = []
        missing: list[str] = []
        with self._index.bulk():
            self._sync_files(on_disk, rows, added, updated, unchanged, failed, no_progress)
            for row in known:
                if row.file_path in listed:
                    continue
                try:
                    if self._forget_deleted_file(row.file_path):
                        removed.append(row.file_path)
                    else:
                        missing.append(row.file_path)
                except KnowledgeBaseError as exc:
                    failed.append((row.file_path, str(exc)))
                    log.warning("sync could not remove %s: %s", row.file_path, exc)
        log.debug("sync of %d paths: %d added, %d updated, %d unchanged, %d removed, %d failed", len(relatives),
                  len(added), len(updated), len(unchanged), len(removed), len(failed))
        return SyncReport(tuple(added), tuple(updated), tuple(unchanged), tuple(failed), tuple(missing),
                          tuple(removed))

    def _relative_of(self, path: str | os.PathLike[str]) -> str | None:
        """`api/x.md` for an absolute path under the base or a display path; "" for the base; else `None`."""
        candidate = Path(path)
        display = self._index.display_path("")
        if not candidate.is_absolute():
            text = candidate.as_posix()
            if text != display and not text.startswith(display + "/"):
                return None
            candidate = self._index.base_dir / text[len(display) + 1:]
        try:
            relative = candidate.relative_to(self._index.base_dir).as_posix()
        except ValueError:
            return None
        return "" if relative == "." else relative

    def _forget_deleted_file(self, file_path: str) -> bool:
        """Delete the row and vectors of a file that is gone, under the document's lock; False (nothing done)
        when the row is already gone or something exists at the path again."""
        with self._locked(file_path):
            row = self._metadata.get_by_path(file_path)
            real = self._index.lexical_path(file_path)
            if row is None or real is None or os.path.lexists(real):
                return False
            self._metadata.set_pending(row.id, "delete", self._owner)
            self._finish_delete(row)
        log.info("removed %s: its file was deleted", file_path)
        return True

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
                self._index_from_disk(file_path, row, no_progress)
                (updated if row is not None else added).append(file_path)
            except (KnowledgeBaseError, OSError) as exc:
                gone = self._index.lexical_path(file_path)
                if gone is not None and not os.path.lexists(gone):
                    # deleted while the sync ran (a git checkout in progress): not a failure, and the deletion
                    # is the next sync's (or the watcher's next batch's) to handle
                    log.debug("%s vanished during the sync", file_path)
                    continue
                failed.append((file_path, str(exc)))
                log.warning("sync could not index %s: %s", file_path, exc)

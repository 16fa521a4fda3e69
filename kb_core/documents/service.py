"""Upload, delete and re-index, so that disk, database, Milvus and L0 never disagree (the spec's upload and delete).

Everything that can fail without side effects (validation, parsing, chunking, embedding) runs before the
first write. The writes then go file -> database row (uncommitted) -> Milvus -> commit -> L0, and a failure
undoes the earlier steps in reverse (beyond the spec's cleanup): the previous file bytes and vectors are kept in memory
for that. Deletion moves the file into the trash (`trash.py`): trash item prepared -> intent record -> vectors ->
file moved into the trash -> L0 -> row, so a failure part-way leaves a row that `reconcile` (or deleting again)
finishes, and the file is in the knowledge base or in the trash at every moment. Restoring a trashed document
is an upload of its bytes. Bringing the stores back into agreement after anything else lives in `reconcile`.

A backend that did not answer in time (a frozen database or Milvus server) is not asked again by the undo: that
would make the caller wait a second timeout. The file is restored at once and the row stays PENDING (the intent
record); this process settles it in the background once the backend answers (`stranded`,
`Reconciler.recover_dead_writers`), as the next opening would after a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Protocol

from kb_core.access import acting_name
from kb_core.documents.chunking import CONTENT_VERSION, FRONTMATTER_HEADING, Chunk, chunk_markdown
from kb_core.documents.cleaning import first_heading
from kb_core.documents.folder import KnowledgeFolder, checked_sha256, decode_markdown
from kb_core.documents.frontmatter import Frontmatter, parse_frontmatter_strict
from kb_core.documents.trash import Trash, TrashItem, TrashSlot
from kb_core.errors import (
    DocumentConflictError,
    DocumentError,
    FrontmatterError,
    KnowledgeBaseError,
    RestoreConflictError,
    UploadRejected,
)
from kb_core.keywords.entry import KnowledgeEntry
from kb_core.progress import Progress, no_progress
from kb_core.storage.db_models import DocumentStatus
from kb_core.storage.metadata_store import DocumentRecord, DocumentValues
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder, MetadataRepository
from kb_core.storage.vector_store import FULLTEXT_PROFILE

log = logging.getLogger(__name__)

__all__ = ["DeleteOutcome", "DocumentError", "DocumentService", "L0Writer", "Progress", "ReindexReport",
           "UploadOutcome"]


class L0Writer(Protocol):
    """What the writers need of L0 (`kb_core.keywords.index.KnowledgeIndex` is one)."""

    def add(self, entry: KnowledgeEntry, *, sha256: str | None = None) -> None: ...
    def remove(self, file_path: str) -> bool: ...
    def bulk(self) -> AbstractContextManager[None]: ...
    def load(self) -> int: ...


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
    trashed: TrashItem | None = None  # where the file went; None when there was no file to keep


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
    dense_missing: bool = False  # the model was not ready: indexed for full text only, re-index fills it in


_BatchItem = tuple[str, str, str, bytes, PreparedDocument]  # (file path, category, file name, bytes, prepared)


def header_text(fm: Frontmatter) -> str:
    """The frontmatter as a searchable chunk: a third of real keywords appear nowhere in the body. The first
    line is always the title (empty when there is none): L1's title ranking reads it there."""
    lines = [line for line in (fm.summary, "keywords: " + ", ".join(fm.keywords) if fm.keywords else "") if line]
    if not fm.title and not lines:
        return ""
    return "\n".join([fm.title, *lines])


def document_chunks(text: str, fm: Frontmatter | None) -> tuple[list[Chunk], list[str]]:
    """A document's chunks as an upload stores them, and the text each one is indexed and embedded by: the
    frontmatter's chunk first when it says anything (`header_text`), then the body's sections, each text prefixed
    with the title and heading path. No chunks: nothing to index."""
    chunks = chunk_markdown(text)
    title = fm.title if fm else ""
    texts = [c.embedding_text(title) for c in chunks]
    if fm is not None and header_text(fm):
        chunks = [Chunk(0, (FRONTMATTER_HEADING,), header_text(fm)),
                  *(Chunk(c.chunk_no + 1, c.heading_path, c.text) for c in chunks)]
        texts = [chunks[0].text] + texts
    if not chunks and (heading := first_heading(text)):
        # a page that is only its heading, without frontmatter (a stub a translated site keeps): its title is
        # what L1 finds it by; refused, it stayed "not indexed" for ever and every status said the stores
        # disagree
        chunks, texts = [Chunk(0, (heading,), heading)], [heading]
    return chunks, texts


def upload_chunks(text: str, *, source: str, category: str, doc_id: int = 1) -> list[ChunkRow]:
    """The chunk rows an upload of the Markdown `text` stores, without their vectors: what
    `kb.documents.chunks(doc_id)` returns after uploading it as `source` (its display path,
    `knowledge_base/<category>/<name>`) into `category`. Computed without a knowledge base, for tests and
    benchmarks that fill L1's stores themselves (exported as `kb_core.testing.upload_chunks`). Frontmatter that
    does not parse is ignored, as the upload ignores it; a text with nothing to index gives no rows (the upload
    refuses it)."""
    try:
        fm = parse_frontmatter_strict(text)
    except Exception:  # noqa: BLE001 - as `prepare`: an upload goes on without frontmatter it cannot read
        fm = None
    chunks, texts = document_chunks(text, fm)
    return [ChunkRow(doc_id=doc_id, source=source, category=category, chunk_no=chunk.chunk_no,
                     heading=chunk.heading, text=chunk_text) for chunk, chunk_text in zip(chunks, texts, strict=True)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


DENSE_MISSING = "dense vectors missing: the model was not ready; re-index or reconcile adds them"


def dense_missing(row: DocumentRecord) -> bool:
    """Whether a row was indexed for full text only while the model was not ready (rows written before the
    message named reconcile said "repair": the prefix is what counts)."""
    return (row.last_error or "").startswith("dense vectors missing")


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


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _values_of(record: DocumentRecord) -> DocumentValues:
    return DocumentValues(**{f.name: getattr(record, f.name) for f in fields(DocumentValues)})


# the store each write step talks to: the undo of that store's earlier steps is left to recovery when it timed out
_STORE_OF_STEP = {"database": "row", "database commit": "row", "write vectors": "vectors",
                  "delete stale vectors": "vectors"}
_STORE_NAMES = {"row": "the database", "vectors": "Milvus"}


@dataclass(frozen=True)
class _Previous:
    """What a write replaces: the file's bytes (None: nothing there, or no file to write) and the chunks."""

    file_bytes: bytes | None
    chunks: list[ChunkRow]


class _Write:
    """A write under way: its step and since when (the rollback tells a timeout from a quick failure by it),
    the document's row id once it has one, and the undos of the steps done, in order."""

    def __init__(self, doc_id: int | None):
        self.step = "database"
        self.started = time.monotonic()
        self.doc_id = doc_id
        self.undo: list[tuple[str, Callable[[], None]]] = []

    def at(self, step: str) -> None:
        self.step, self.started = step, time.monotonic()


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
        folder: KnowledgeFolder,
        l0: L0Writer,
        metadata: MetadataRepository,
        vectors: ChunkStore,
        embedder: Embedder | None,
        *,
        trash: Trash,
        backend_timeout: float = 10.0,
    ):
        self._folder = folder
        self._trash = trash
        self._l0 = l0
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder if vectors.has_dense else None
        # One writer at a time per process: the rollback of one upload must not undo another's work.
        self._write_lock = threading.RLock()
        self._held: set[str] = set()  # paths whose database lock this service holds (under _write_lock)
        self.owner = new_owner()
        self._backend_timeout = backend_timeout
        # writes that failed on a backend that did not answer in time: path -> document id (None: no row yet).
        # Whether their last step landed is unknown until the backend answers; recovery settles them then.
        self._stranded: dict[str, int | None] = {}

    def stranded(self) -> dict[str, int | None]:
        """This service's writes left to recovery because a backend did not answer in time (path -> id). Never
        waits for a write in flight (a copy: writers change it under their locks)."""
        return self._stranded.copy()

    def forget_stranded(self, file_path: str) -> None:
        """Recovery settled the write at `file_path` (the caller holds its lock)."""
        self._stranded.pop(file_path, None)

    @property
    def profile(self) -> str:
        """What produced the vectors: the model id, or "fulltext" when the collection has no dense field."""
        return self._embedder.model_id if self._embedder is not None else FULLTEXT_PROFILE

    # -- preparing -----------------------------------------------------------------------------------
    def prepare(self, text: str, *, source: str, progress: Progress = no_progress,
                dense: bool = True) -> PreparedDocument:
        """Parse, chunk and embed. `dense=False` leaves the dense vectors for later (marked missing, as when
        the model is still loading): the full text is searchable at once."""
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
        chunks, texts = document_chunks(text, fm)
        if not chunks:
            raise UploadRejected(f"{source} has no text to index")
        vectors = None
        dense_missing = False
        if self._embedder is not None:
            state = self._embedder.state
            if not dense:
                dense_missing = True
            elif not state.ready:
                # The model never blocks a write: still loading, or failed to load, the document goes in for
                # full-text search now and `reindex` / `reconcile` add its dense vectors once the model is ready.
                dense_missing = True
                warnings.append(f"the embedding model is {state.state}: indexed for full-text search only; "
                                "re-index (or reconcile) adds the dense vectors when the model is ready")
            else:
                progress("embedding", 0, len(texts))
                try:
                    vectors = self._embedder.encode_documents(texts, progress=progress)
                except Exception as exc:  # noqa: BLE001
                    raise DocumentError("embedding", f"{type(exc).__name__}: {exc}") from exc
        return PreparedDocument(text, fm, problem, chunks, texts, vectors, tuple(warnings), dense_missing)

    # -- upload --------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress = no_progress,
               if_match: str | None = None, create_only: bool = False) -> UploadOutcome:
        """Index a file as `<category>/<name>`, replacing what is there. With `if_match` (the sha256 of the version
        the caller based this on, as `content_sha256` or the upload preview shows it) the upload is a replace
        that only happens while that version is still the current one: checked under the document's lock, so
        a concurrent writer in any process cannot slip in between; otherwise `DocumentConflictError`.
        With `create_only=True` the upload only creates: a file at that path (indexed or not, written by
        another process or dropped on disk meanwhile) makes it a `DocumentConflictError`, checked the same way,
        so of two writers creating one new name exactly one wins."""
        if create_only and if_match is not None:
            raise UploadRejected("create_only and if_match exclude each other (create a new document, or replace "
                                 "a given version); nothing was written")
        file_path, target = self._folder.target(category, file_name)
        name, category = target.name, target.parent.relative_to(self._folder.base_dir).as_posix()
        text = decode_markdown(data, max_bytes=self._folder.max_bytes, file_name=name)
        digest = sha256(bytes(data))
        if if_match is not None:
            if_match = checked_sha256(if_match)  # a wrong type or shape is bad input; upper-case hex is fine
            self._check_version(file_path, target, if_match)  # early, before minutes of embedding; again below
        if create_only:
            self._check_absent(file_path, target)  # early; again under the lock
        existing = self._read_row(file_path)
        if existing is not None and self.is_current(existing, digest, target):
            progress("done", 1, 1)
            return UploadOutcome("unchanged", existing, ("identical to the indexed version: nothing to do",))
        # Parsing, chunking and embedding (seconds to minutes for a big document) run before the write lock:
        # other uploads, deletes and re-indexes do not wait for them.
        prepared = self.prepare(text, source=file_path, progress=progress)
        with self.locked(file_path):
            if if_match is not None:
                self._check_version(file_path, target, if_match)
            if create_only:
                self._check_absent(file_path, target)
            existing = self._read_row(file_path)  # again: another writer may have been faster
            if existing is not None and self.is_current(existing, digest, target):
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
            data = self._folder.current_bytes(target)
            current = sha256(data) if data is not None else None
        except OSError as exc:
            raise DocumentError("read the current version", str(exc)) from exc
        if current != expected.strip().lower():
            log.warning("upload of %s refused: based on %s, current %s", file_path, expected[:12], current)
            raise DocumentConflictError(file_path, expected, current)

    def _check_absent(self, file_path: str, target: Path) -> None:
        """`create_only`: nothing may be at the path. Like `_check_version`, the file on disk decides: a file
        not indexed yet counts as there, a row whose file is gone (or never arrived) does not."""
        try:
            data = self._folder.current_bytes(target)
        except OSError as exc:
            raise DocumentError("read the current version", str(exc)) from exc
        if data is not None:
            current = sha256(data)
            log.warning("create-only upload of %s refused: it exists (version %s)", file_path, current[:12])
            raise DocumentConflictError(file_path, None, current)

    def is_current(self, row: DocumentRecord, digest: str, target: Path) -> bool:
        if row.content_sha256 != digest or row.status != DocumentStatus.INDEXED or \
                row.content_version != CONTENT_VERSION:  # chunked by older cleaning: made again
            return False
        if row.embedding_model != self.profile and not (dense_missing(row) and not self.dense_ready()):
            return False
        try:
            return sha256(self._folder.current_bytes(target) or b"") == digest
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
        previous = self._previous_version(write_file, existing)
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
            content_version=CONTENT_VERSION,
        )
        write = _Write(existing.id if existing is not None else None)
        try:
            self._write_steps(write, values, data, prepared, existing, write_file, previous, progress)
        except BaseException as exc:  # noqa: BLE001 - whatever failed or interrupted: undo, then re-raise
            failure = self._roll_back(write, file_path, exc)
            if failure is None:
                raise
            raise failure from exc

        self._stranded.pop(file_path, None)  # a write that went through settles any earlier one
        self._update_l0(file_path, prepared.frontmatter, category, prepared.text, digest)
        record = self._metadata.get(write.doc_id) if write.doc_id is not None else None
        if record is None:  # pragma: no cover - committed just above
            raise DocumentError("database", f"the row of {file_path} vanished after commit")
        return record

    def _previous_version(self, write_file: Path | None, existing: DocumentRecord | None) -> _Previous:
        """What the write replaces, read before it starts: the file's bytes and the document's chunks."""
        try:
            old_bytes = self._folder.current_bytes(write_file) if write_file is not None else None
            old_chunks = self._vectors.chunks_of(existing.id, with_vectors=True) if existing is not None else []
        except Exception as exc:  # noqa: BLE001
            raise DocumentError("read the previous version", f"{type(exc).__name__}: {exc}") from exc
        return _Previous(old_bytes, old_chunks)

    def _write_steps(self, write: _Write, values: DocumentValues, data: bytes, prepared: PreparedDocument,
                     existing: DocumentRecord | None, write_file: Path | None, previous: _Previous,
                     progress: Progress) -> None:
        """The row (PENDING), the file, the vectors, the row's commit: each step's undo is pushed before it runs,
        and `write` says which step is running, since when."""
        file_path, category = values.file_path, values.category
        doc_id = write.doc_id = self._metadata.save_document(values, write.doc_id, pending=("upload", self.owner))
        if existing is None:
            write.undo.append(("row", lambda: self._metadata.delete_document(doc_id)))
        else:
            write.undo.append(("row", lambda: self._metadata.save_document(_values_of(existing), existing.id)))
        if write_file is not None:
            write.step = "save file"  # not a remote store: its clock is not read
            progress("saving", 0, 1)
            write.undo.append(("file", lambda: self._folder.undo_write(write_file, data, previous.file_bytes)))
            self._folder.write(write_file, data)
        write.at("write vectors")
        progress("indexing", 0, len(prepared.chunks))
        # Upsert by `{doc_id}:{chunk_no}` first, then drop chunks a longer old version had: a failed write
        # leaves the old vectors untouched. The undo is pushed first: a write can fail half-way.
        write.undo.append(("vectors", lambda: self._restore_vectors(doc_id, previous.chunks, len(prepared.chunks))))
        self._vectors.upsert(self._rows(doc_id, file_path, category, prepared))
        if len(previous.chunks) > len(prepared.chunks):
            write.at("delete stale vectors")
            self._vectors.delete_chunks_from(doc_id, len(prepared.chunks))
        write.at("database commit")
        progress("indexing", len(prepared.chunks), len(prepared.chunks))
        self._metadata.finish_write(doc_id, last_error=values.last_error)

    def _roll_back(self, write: _Write, file_path: str, exc: BaseException) -> DocumentError | None:
        """Undoes what the write did, newest first, and returns the error to raise (None: re-raise `exc`, an
        interruption rather than a failure)."""
        silent = self._timed_out(write.step, write.started, exc)
        # the store that did not answer is not asked again now (the caller would wait a second timeout), and
        # the row keeps its intent record for recovery, which settles the write once that store answers
        left = {silent, "row"} if silent else set()
        problems = _run_undos([(what, action) for what, action in write.undo if what not in left])
        message = f"{type(exc).__name__}: {exc}"
        if silent:
            message += (f"; {_STORE_NAMES[silent]} did not answer in time: the file is as it was, and this "
                        "process finishes undoing the write once it answers (so does reopening or reconcile)")
        if problems:
            message += ("; and the rollback was incomplete (" + "; ".join(problems) + "): this process "
                        "finishes it once the stores answer again, or run reconcile")
        if silent or problems:
            self._stranded[file_path] = write.doc_id
        log.error("storing %s failed at %s: %s", file_path, write.step, message)
        return DocumentError(write.step, message) if isinstance(exc, Exception) else None

    def _timed_out(self, step: str, started: float, exc: BaseException) -> str | None:
        """The store ("row" | "vectors") whose step failed after waiting most of the backend timeout, or None
        (a quick failure, an interruption, or a step on no remote store)."""
        store = _STORE_OF_STEP.get(step)
        if store is None or not isinstance(exc, Exception):
            return None
        return store if time.monotonic() - started >= self._backend_timeout / 2 else None

    @contextlib.contextmanager
    def locked(self, file_path: str) -> Iterator[None]:
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

    def exclusive(self) -> AbstractContextManager:
        """This process's write lock alone (no document lock): a listing taken under it misses no write."""
        return self._write_lock

    def dense_ready(self) -> bool:
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

    def _update_l0(self, file_path: str, fm: Frontmatter | None, category: str, text: str, digest: str) -> None:
        """`digest`: the hash of the bytes `text` came from (the change feed announces it: L0 need not read them
        again when this write comes back through the feed)."""
        if fm is not None:
            self._l0.add(KnowledgeEntry.from_frontmatter(file_path, fm, category, text), sha256=digest)
        else:
            self._l0.remove(file_path)

    # -- delete --------------------------------------------------------------------------------------
    def delete(self, doc_id: int) -> DeleteOutcome:
        """Into the trash: a trash item is prepared first (a trash that cannot be written deletes nothing), then
        the intent record (row PENDING "delete"), then vectors -> file moved into the trash -> L0 -> row. A
        failure or a crash part-way leaves the row marked, and deleting again (or opening the knowledge base)
        finishes it, moving the file into the trash if it is still in the knowledge base."""
        try:
            row = self._metadata.get(doc_id)
        except KnowledgeBaseError as exc:
            raise DocumentError("database", f"{exc}; nothing was deleted") from exc
        if row is None:
            return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
        with self.locked(row.file_path):
            try:
                row = self._metadata.get(doc_id)  # again, under the locks
            except KnowledgeBaseError as exc:
                raise DocumentError("database", f"{exc}; nothing was deleted") from exc
            if row is None:
                return DeleteOutcome(False, None, f"document {doc_id} does not exist (already deleted?)")
            try:
                slot = self._trash_slot(row)
            except OSError as exc:
                raise DocumentError("move to the trash", f"the trash ({self._trash.directory}) cannot be written: "
                                                         f"{exc}; nothing was deleted") from exc
            try:
                self._metadata.set_pending(doc_id, "delete", self.owner)
            except KnowledgeBaseError as exc:
                if slot is not None:
                    self._trash.abandon(slot)
                raise DocumentError("database", f"{exc}; nothing was deleted") from exc
            trashed = self.finish_delete(row, slot)
        log.info("deleted document %d (%s)%s", doc_id, row.file_path,
                 f", its file is in the trash ({trashed.item_id})" if trashed else "")
        message = f"deleted {row.file_path}: " + ("its file is in the trash" if trashed is not None
                                                   else "there was no file to keep in the trash")
        return DeleteOutcome(True, row.file_path, message, trashed)

    def _trash_slot(self, row: DocumentRecord) -> TrashSlot | None:
        """A trash item for the row's file, or None when its path holds no regular file (gone, or a link: a link
        is removed, never what it names). `OSError` when the trash cannot be written."""
        real = self._folder.lexical_path(row.file_path)
        relative = self._folder.relative_of(row.file_path)
        if real is None or relative is None or not _is_regular(real):
            return None
        # recovery of an interrupted delete: when it was asked for (set_pending's time) and by whom
        asked = row.updated_at if row.pending_operation == "delete" else None
        return self._trash.prepare(relative, deleted_by=acting_name() or row.changed_by, deleted_at=asked,
                                   document_id=row.id)

    def finish_delete(self, row: DocumentRecord, slot: TrashSlot | None = None) -> TrashItem | None:
        """Vectors -> file into the trash -> L0 -> row, for a row marked PENDING "delete". The trash item the
        file went to (None: there was no regular file at its path)."""
        try:
            self._vectors.delete_document(row.id)
        except Exception as exc:  # noqa: BLE001
            if slot is not None:
                self._trash.abandon(slot)
            raise DocumentError("delete vectors", f"{exc}; the document is marked for deletion: delete it again "
                                                  "(or reopen / reconcile) to finish") from exc
        # the path itself, never where a link points: deleting removes the link, not a file elsewhere
        real = self._folder.lexical_path(row.file_path)
        trashed = None
        try:
            if real is not None and _is_regular(real):
                slot = slot or self._trash_slot(row)
                if slot is not None:
                    trashed = self._trash.move_in(slot, real)
            else:
                if slot is not None:
                    self._trash.abandon(slot)
                if real is not None:
                    real.unlink(missing_ok=True)  # a link, or something else put in its place: no document bytes
        except OSError as exc:
            if slot is not None:
                self._trash.abandon(slot)
            self._mark_incomplete(row.id, f"deletion incomplete: the file could not be moved to the trash ({exc})")
            raise DocumentError("move to the trash", f"{exc}; the vectors are gone, delete again to finish") from exc
        self._l0.remove(row.file_path)
        try:
            self._metadata.delete_document(row.id)
        except KnowledgeBaseError as exc:
            raise DocumentError("delete row", f"{exc}; file and vectors are gone, delete again to finish") from exc
        return trashed

    # -- restore -------------------------------------------------------------------------------------
    def restore(self, item: TrashItem, *, replace: bool = False, progress: Progress = no_progress) -> UploadOutcome:
        """Bring a trashed document back byte for byte through the upload (validation, the path rule, every
        store, the change feed), then take it out of the trash. A file at its path again is a
        `RestoreConflictError` (nothing written, the item stays) unless `replace=True`; the very same bytes there
        already (a restore cut short before the item was removed) count as restored.

        `replace=True` never throws the current version away: a copy of it goes into the trash first (written
        and synced), then the upload replaces exactly that version (`if_match`), then the restored item leaves
        the trash. A kill at any point leaves every version somewhere: before the copy, both where they were;
        after it, the current one twice (in place and in the trash); after the upload, the replaced one in the
        trash and the restored one in place (its item too, until removed; restoring it again is a no-op)."""
        data = self._trash.read(item)
        digest = sha256(data)
        try:
            outcome = self.upload(item.file_name, data, item.category, create_only=True, progress=progress)
        except DocumentConflictError as exc:
            if exc.current == digest:
                outcome = self.upload(item.file_name, data, item.category, if_match=digest, progress=progress)
            elif not replace:
                raise RestoreConflictError(item.file_path, exc.current) from exc
            else:
                outcome = self._restore_over(item, data, exc.current, progress)
        self._trash.remove(item)  # after the upload: a kill in between leaves the item; restoring it again is a no-op
        log.info("restored %s from the trash (%s): %s", item.file_path, item.item_id, outcome.action)
        return outcome

    def _restore_over(self, item: TrashItem, data: bytes, current: str | None,
                      progress: Progress) -> UploadOutcome:
        """`restore(replace=True)` over another version at the path: that version into the trash, then replaced."""
        target = self._folder.lexical_path(item.file_path)
        try:
            existing = self._folder.current_bytes(target) if target is not None else None
        except OSError as exc:
            raise DocumentError("read the current version", f"{exc}; nothing was restored") from exc
        if existing is None or sha256(existing) != current:  # changed again meanwhile: look before replacing
            raise RestoreConflictError(item.file_path, None if existing is None else sha256(existing))
        try:
            kept = self._trash.keep_copy(item.relative_path, existing, deleted_by=acting_name(),
                                         reason=f"replaced by restoring {item.item_id}")
        except OSError as exc:
            raise DocumentError("move to the trash", f"the version at {item.file_path} could not be kept in the "
                                f"trash ({exc}); nothing was restored or replaced") from exc
        try:
            return self.upload(item.file_name, data, item.category, if_match=current, progress=progress)
        except DocumentConflictError as exc:  # another writer replaced it between the copy and the upload
            self._trash.remove(kept)  # the copy is of a version that writer replaced, not we
            raise RestoreConflictError(item.file_path, exc.current) from exc
        except BaseException:
            log.warning("restore of %s over %s failed: the version that was there is in place and kept in the "
                        "trash too (%s)", item.item_id, item.file_path, kept.item_id)
            raise

    def _mark_incomplete(self, doc_id: int, message: str) -> None:
        try:
            self._metadata.set_status(doc_id, DocumentStatus.FAILED, message)
        except KnowledgeBaseError as exc:
            log.error("could not record the failed deletion of %d: %s", doc_id, exc)

    # -- re-index and sync ---------------------------------------------------------------------------
    def reindex(self, doc_id: int, *, progress: Progress = no_progress) -> DocumentRecord:
        """Re-parse, re-chunk and re-embed a document from its saved file (e.g. after a model change)."""
        row = self._metadata.get(doc_id)
        if row is None:
            raise DocumentError("reindex", f"document {doc_id} does not exist")
        return self.index_file(row.file_path, progress)

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

    def index_new_files(self, file_paths: Sequence[str]) -> tuple[list[str], list[str]]:
        """Index files that have no row yet as one batch: one transaction for their intent records, one write of
        all their chunks (one Milvus upsert and flush, one full-text transaction), one transaction settling
        them, then L0 — instead of a commit, an upsert and a flush per file. Returns (indexed, left): `left`
        are the files this batch did not take (a row appeared meanwhile, unreadable, no text, or the batch
        failed and was undone), for the caller to index one by one, which reports each file's own error. A
        crash leaves the rows PENDING, which recovery settles as it does a single write's."""
        items: list[_BatchItem] = []
        left: list[str] = []
        for file_path in file_paths:
            try:
                category, name = self._folder.document_place(file_path)
                data = self._folder.read_bytes(file_path)
                text = decode_markdown(data, max_bytes=max(self._folder.max_bytes, len(data)), file_name=file_path)
                items.append((file_path, category, name, data, self.prepare(text, source=file_path, dense=False)))
            except (KnowledgeBaseError, OSError):
                left.append(file_path)
        if not items:
            return [], left
        items = self._embed_together(items)
        with contextlib.ExitStack() as held:
            for file_path in sorted(p for p, *_ in items):  # one order: two batches never wait for each other
                held.enter_context(self.locked(file_path))
            if any(self._metadata.get_by_path(p) is not None for p, *_ in items):
                return [], [*left, *(p for p, *_ in items)]  # written meanwhile: the single path decides
            values = [DocumentValues(
                file_name=name, category=category, file_path=file_path, status=DocumentStatus.PENDING,
                metadata_json=(json.dumps(prep.frontmatter.to_dict(), ensure_ascii=False) if prep.frontmatter
                               else None),
                content_sha256=sha256(data), size_bytes=len(data), chunk_count=len(prep.chunks),
                embedding_model=FULLTEXT_PROFILE if prep.dense_missing else self.profile,
                last_error=DENSE_MISSING if prep.dense_missing else None, content_version=CONTENT_VERSION)
                for file_path, category, name, data, prep in items]
            ids: list[int] = []
            try:
                ids = self._metadata.save_new_documents(values, pending=("upload", self.owner))
                rows = [row for doc_id, (file_path, category, _, _, prep) in zip(ids, items, strict=True)
                        for row in self._rows(doc_id, file_path, category, prep)]
                self._vectors.upsert(rows)
                self._metadata.finish_writes([(doc_id, v.last_error) for doc_id, v in zip(ids, values, strict=True)])
            except Exception as exc:  # noqa: BLE001 - undone here, then each file goes the single way
                log.warning("a batch of %d new documents failed (%s: %s): undoing it, then one by one",
                            len(items), type(exc).__name__, exc)
                problems = _run_undos([("vectors", lambda d=d: self._vectors.delete_document(d)) for d in ids]
                                      + ([("row", lambda: self._metadata.delete_documents(ids))] if ids else []))
                if problems:  # left PENDING for recovery (this service's rows are settled once stores answer)
                    raise DocumentError("batch undo", "; ".join(problems)) from exc
                return [], [*left, *(p for p, *_ in items)]
            with self._l0.bulk():
                for (file_path, category, _, _, prep), value in zip(items, values, strict=True):
                    self._update_l0(file_path, prep.frontmatter, category, prep.text, value.content_sha256)
        log.info("indexed %d new documents as one batch (%d chunks)", len(items), len(rows))
        return [p for p, *_ in items], left

    def _embed_together(self, items: list[_BatchItem]) -> list[_BatchItem]:
        """The dense vectors of a whole batch in one `encode_documents` call - the model's own batches fill up,
        instead of a few calls of a page's 10-20 passages each. A model that is not ready, or fails, leaves the
        batch for full-text search now (dense missing: re-index or reconcile adds them, as for one file)."""
        if self._embedder is None or not self._embedder.state.ready:
            return items
        texts = [t for *_, prep in items for t in prep.texts]
        try:
            vectors = self._embedder.encode_documents(texts)
        except Exception as exc:  # noqa: BLE001 - as when the model is not ready: full text now, vectors later
            log.warning("embedding a batch of %d documents failed (%s: %s): indexed for full-text search only",
                        len(items), type(exc).__name__, exc)
            return items
        out: list[_BatchItem] = []
        start = 0
        for file_path, category, name, data, prep in items:
            end = start + len(prep.texts)
            out.append((file_path, category, name, data,
                        replace(prep, vectors=vectors[start:end], dense_missing=False)))
            start = end
        return out

    def index_file(self, file_path: str, progress: Progress = no_progress, *, dense: bool = True) -> DocumentRecord:
        """Index a document from its file on disk (the file wins over what the stores hold); `dense=False`:
        full text now, dense vectors later (`prepare`)."""
        category, name = self._folder.document_place(file_path)
        try:
            data = self._folder.read_bytes(file_path)
        except FileNotFoundError as exc:
            raise DocumentError("read file", f"{file_path} is not on disk") from exc
        except OSError as exc:
            raise DocumentError("read file", f"{file_path}: {exc}") from exc
        text = decode_markdown(data, max_bytes=max(self._folder.max_bytes, len(data)), file_name=file_path)
        prepared = self.prepare(text, source=file_path, progress=progress, dense=dense)  # outside the lock
        with self.locked(file_path):
            existing = self._metadata.get_by_path(file_path)  # the row as it is now, under the lock
            return self._store(file_path, name, category, data, sha256(data), prepared, existing,
                               write_file=None, progress=progress)


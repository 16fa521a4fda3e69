"""Reconcile: the one way to bring disk, database, Milvus (and its full-text index) and L0 into agreement.

It finishes or undoes writes a crash left PENDING, removes stray temp files, deletes vectors without a row or
beyond a row's chunk count, re-indexes documents with missing vectors, indexes files added or changed by hand,
and reports rows whose file has gone (removing them only when asked: `delete_missing`). With `paths` it
looks at just those files and folders (the folder watcher's incremental run). Opening a knowledge base runs
the cheap first step (`recover`: only the PENDING rows), and a running process repeats it for writers that
died, and for its own writes a backend outage cut short (`recover_dead_writers`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from kb_core.documents.folder import AliasReason, KnowledgeFolder
from kb_core.documents.service import DocumentService, L0Writer, dense_missing, owner_is_gone, sha256
from kb_core.errors import DocumentError, KnowledgeBaseError
from kb_core.progress import Progress, no_progress
from kb_core.storage.metadata_store import DocumentRecord
from kb_core.storage.ports import ChunkStore, MetadataRepository

log = logging.getLogger(__name__)

BATCH = 64  # new files indexed together (one intent transaction, one chunk write, one settling transaction)

__all__ = ["ReconcileReport", "Reconciler"]


@dataclass(frozen=True)
class ReconcileReport:
    added: tuple[str, ...] = ()  # files without a row, indexed
    updated: tuple[str, ...] = ()  # files changed since their row was written, indexed again
    unchanged: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()  # (path, why) of everything that could not be reconciled
    missing_files: tuple[str, ...] = ()  # rows whose file has gone, kept (reconcile with delete_missing)
    removed: tuple[str, ...] = ()  # rows (and vectors) removed because their file has gone
    finished: tuple[str, ...] = ()  # interrupted uploads completed from the file on disk
    undone: tuple[str, ...] = ()  # interrupted uploads without a file, and interrupted deletes, completed
    left_to_live_writers: tuple[str, ...] = ()  # PENDING rows of writers that are still running
    temp_files_removed: tuple[str, ...] = ()
    orphan_documents: tuple[int, ...] = ()  # document ids whose vectors had no row (deleted)
    trimmed: tuple[str, ...] = ()  # documents with vectors beyond their chunk count (deleted)
    reindexed: tuple[str, ...] = ()  # documents with fewer vectors than chunks, or no dense vectors yet
    refused: tuple[tuple[str, str], ...] = ()  # (path, why) of .md files the path rule does not take
    aliases: tuple[str, ...] = ()  # rows kept under another name of a file (a link): removed, the disk untouched

    def __add__(self, other: ReconcileReport) -> ReconcileReport:
        return ReconcileReport(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @property
    def changed(self) -> bool:
        """Whether anything was written (or failed): what is worth telling a curator."""
        return any(getattr(self, f.name) for f in fields(self)
                   if f.name not in ("unchanged", "missing_files", "refused"))

    def summary(self) -> str:
        parts = [f"{len(self.added)} files added", f"{len(self.updated)} updated",
                 f"{len(self.finished) + len(self.undone)} interrupted writes completed",
                 f"{len(self.reindexed)} re-indexed",
                 f"{len(self.orphan_documents) + len(self.trimmed)} documents' stray vectors deleted",
                 f"{len(self.removed)} removed", f"{len(self.missing_files)} rows without a file"]
        if self.aliases:
            parts.append(f"{len(self.aliases)} rows of links (aliases) removed")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.refused:
            parts.append(f"{len(self.refused)} .md files refused by the path rule")
        return "; ".join(parts)


class Reconciler:
    def __init__(self, service: DocumentService, folder: KnowledgeFolder, l0: L0Writer,
                 metadata: MetadataRepository, vectors: ChunkStore):
        self._service = service
        self._folder = folder
        self._l0 = l0
        self._metadata = metadata
        self._vectors = vectors

    def reconcile(self, paths: Iterable[str | os.PathLike[str]] | None = None, *, delete_missing: bool = False,
                  progress: Progress = no_progress) -> ReconcileReport:
        if paths is not None:
            return self._reconcile_paths(paths, delete_missing)
        report = self.recover() + self._check_vectors(progress)
        rows = {r.file_path: r for r in self._metadata.list_documents()}
        documents, refused = self._folder.scan()
        on_disk = [self._folder.display_path(rel) for rel in documents]
        listed = set(on_disk)
        gone = [row for path, row in sorted(rows.items()) if path not in listed]
        with self._l0.bulk():  # one L0 rebuild for the whole batch, not one per file
            report += self._index_files(on_disk, rows, progress)
            report += self._settle_missing(gone, delete_missing, self._aliases(refused))
        with self._service.exclusive():  # a listing taken under the lock cannot miss a concurrent upload
            self._l0.load()  # L0 follows the disk, in scan order
        progress("done", len(on_disk), len(on_disk))
        report += ReconcileReport(refused=tuple((self._folder.display_path(rel), why) for rel, why in refused))
        log.info("reconcile: %s", report.summary())
        return report

    # -- interrupted writes ----------------------------------------------------------------------------
    def recover(self, *, just_scanned: bool = False) -> ReconcileReport:
        """Finish or undo what a crashed writer left PENDING, and remove its stray temp files. Cheap: it
        reads only the pending rows. Rows a live writer (another process) is working on are left alone.
        `just_scanned`: the folder was walked a moment ago (the opening's L0 scan): its temp files are those
        that walk saw, not a second walk's."""
        report = self._recover_rows(self._metadata.pending_documents())
        removed = self._remove_stray_temp_files(self._folder.temp_files_seen if just_scanned else None)
        if report.finished or report.undone or report.failed or removed:
            log.warning("recovered interrupted writes: %d finished, %d undone, %d failed, %d temp files removed",
                        len(report.finished), len(report.undone), len(report.failed), len(removed))
        return report + ReconcileReport(temp_files_removed=tuple(removed))

    def recover_dead_writers(self) -> ReconcileReport:
        """For a process that keeps running: finish or undo the rows of writers (other processes on this host)
        that died since it opened, and the writes of this service that a backend outage left PENDING (or left
        unsure whether their last step landed: `DocumentService.stranded`), once the backends answer again.
        Rows of live writers are not touched. This service's own are settled under the document's lock (and this
        process's write lock), looked at again there: a write of this process still in flight is waited for,
        never interfered with."""
        own = self._service.owner
        pending = self._metadata.pending_documents()
        rows = [row for row in pending if row.pending_owner != own and owner_is_gone(row.pending_owner, own)]
        mine = [row for row in pending if row.pending_owner == own]
        stranded = self._service.stranded()
        if (mine or stranded) and self._vectors_answer():
            rows += mine
        else:
            stranded = {}
        if not rows and not stranded:
            return ReconcileReport()
        report = self._recover_rows(rows) + self._settle_stranded(stranded)
        if report.finished or report.undone or report.failed:  # not this process's own write still in flight
            log.warning("recovered the writes of writers that died or were cut short by an outage: %d finished, "
                        "%d undone, %d failed", len(report.finished), len(report.undone), len(report.failed))
        return report

    def _vectors_answer(self) -> bool:
        """Whether Milvus answers now (the database did: it listed the pending rows). Settling a write while it
        does not would only wait its timeout again, holding this process's write lock."""
        try:
            self._vectors.count_chunks()
            return True
        except KnowledgeBaseError as exc:
            log.info("writes cut short by an outage wait for Milvus: %s", exc)
            return False

    def _settle_stranded(self, stranded: dict[str, int | None]) -> ReconcileReport:
        """This service's writes whose last step may or may not have landed (a commit that timed out): the file
        on disk decides, as after a crash. A row still PENDING was settled by `_recover_rows` just before."""
        finished: list[str] = []
        undone: list[str] = []
        failed: list[tuple[str, str]] = []
        for path in stranded:
            try:
                with self._service.locked(path):
                    row = self._metadata.get_by_path(path)
                    if row is not None and row.pending_operation is None:
                        on_disk = self._folder.exists(path)
                        if on_disk and (row.status != "INDEXED"
                                        or sha256(self._folder.read_bytes(path)) != row.content_sha256):
                            self._service.index_file(path)  # the file on disk wins
                            finished.append(path)
                        elif not on_disk:  # the upload was undone on disk: undo it everywhere
                            self._vectors.delete_document(row.id)
                            self._l0.remove(path)
                            self._metadata.delete_document(row.id)
                            undone.append(path)
                    if row is None or row.pending_operation is None:
                        self._service.forget_stranded(path)
            except (KnowledgeBaseError, OSError) as exc:
                failed.append((path, str(exc)))
                log.error("could not settle the interrupted write of %s: %s", path, exc)
        return ReconcileReport(finished=tuple(finished), undone=tuple(undone), failed=tuple(failed))

    def _recover_rows(self, rows: Iterable[DocumentRecord]) -> ReconcileReport:
        finished: list[str] = []
        undone: list[str] = []
        left: list[str] = []
        failed: list[tuple[str, str]] = []
        service = self._service
        for listed in rows:
            try:
                with service.locked(listed.file_path):
                    row = self._metadata.get(listed.id)  # again, under the lock: it may have settled meanwhile
                    if row is None or row.pending_operation is None:
                        continue
                    if not owner_is_gone(row.pending_owner, service.owner):
                        left.append(row.file_path)
                        continue
                    if row.pending_operation == "delete":
                        service.finish_delete(row)
                        undone.append(row.file_path)
                    elif self._folder.exists(row.file_path):
                        service.index_file(row.file_path)  # the file on disk wins
                        finished.append(row.file_path)
                    else:  # the file never arrived: the upload did not happen
                        self._vectors.delete_document(row.id)
                        self._l0.remove(row.file_path)
                        self._metadata.delete_document(row.id)
                        undone.append(row.file_path)
            except (KnowledgeBaseError, OSError) as exc:
                failed.append((listed.file_path, str(exc)))
                log.error("could not recover the interrupted write of %s: %s", listed.file_path, exc)
        return ReconcileReport(finished=tuple(finished), undone=tuple(undone), left_to_live_writers=tuple(left),
                               failed=tuple(failed))

    def _remove_stray_temp_files(self, seen: list[tuple[Path, int]] | None = None) -> list[str]:
        removed: list[str] = []
        for tmp, pid in self._folder.temp_files() if seen is None else seen:
            if pid == os.getpid() or not owner_is_gone(f"{socket.gethostname()}:{pid}:", self._service.owner):
                continue
            try:
                tmp.unlink()
                removed.append(str(tmp))
            except OSError as exc:
                log.warning("cannot remove stray temp file %s: %s", tmp, exc)
        return removed

    # -- vectors ---------------------------------------------------------------------------------------
    def _check_vectors(self, progress: Progress) -> ReconcileReport:
        """Delete vectors whose row does not exist or whose chunk number is beyond the row's chunk count;
        re-index documents with missing vectors (or without their dense vectors, once the model is ready)."""
        progress("checking vectors", 0, 1)
        orphans: set[int] = set()
        trimmed: list[str] = []
        incomplete: list[DocumentRecord] = []
        with self._service.exclusive():
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
                dense_to_fill = dense_missing(row) and self._service.dense_ready()
                if (count < row.chunk_count or dense_to_fill) and row.pending_operation is None \
                        and self._folder.exists(row.file_path):
                    incomplete.append(row)
        reindexed: list[str] = []
        failed: dict[str, str] = {}
        # Chunks missing from this collection (a new model's collection is empty): full text for all of them
        # first, so that lookups find every document again within seconds, then the dense vectors, which take
        # 0.01-0.4 s a passage. Lookups go on throughout.
        missing = [row for row in incomplete if not dense_missing(row)]
        dense_later = self._service.dense_ready()
        if dense_later:
            for i, row in enumerate(missing):
                progress("checking vectors", i, len(missing))
                try:
                    self._service.index_file(row.file_path, dense=False)
                except (KnowledgeBaseError, OSError) as exc:
                    failed[row.file_path] = str(exc)
        todo = [row for row in incomplete if row.file_path not in failed]
        for i, row in enumerate(todo):
            progress("checking vectors", i, len(todo))
            try:
                self._service.index_file(row.file_path)
                reindexed.append(row.file_path)
            except (KnowledgeBaseError, OSError) as exc:
                failed[row.file_path] = str(exc)
        return ReconcileReport(orphan_documents=tuple(sorted(orphans)), trimmed=tuple(trimmed),
                               reindexed=tuple(reindexed), failed=tuple(failed.items()))

    # -- files -----------------------------------------------------------------------------------------
    def _index_files(self, on_disk: Sequence[str], rows: dict[str, DocumentRecord],
                     progress: Progress) -> ReconcileReport:
        """Index the files that are new or changed since their row (a content hash decides)."""
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        failed: list[tuple[str, str]] = []
        # Many new files (a copied tree, a first reconcile) go in batches: a commit and a flush per batch. A few
        # go one by one, as changed files do: a cancel then stops at the next file.
        new = [p for p in on_disk if p not in rows]
        new = new if len(new) >= BATCH else []
        for start in range(0, len(new), BATCH):
            progress("syncing", start, len(on_disk))
            try:
                done, _left = self._service.index_new_files(new[start:start + BATCH])
            except KnowledgeBaseError as exc:  # the undo failed: recovery settles the rows; say so per file
                failed += [(p, str(exc)) for p in new[start:start + BATCH]]
                continue
            added += done
        batched = set(added) | {p for p, _ in failed}
        rest = [p for p in on_disk if p not in batched]
        for i, file_path in enumerate(rest):
            progress("syncing", len(batched) + i, len(on_disk))
            row = rows.get(file_path)
            real = self._folder.resolve(file_path)
            try:
                if row is not None and real is not None and self._service.is_current(
                        row, sha256(self._folder.read_bytes(file_path)), real):
                    unchanged.append(file_path)
                    continue
                self._service.index_file(file_path)
                (updated if row is not None else added).append(file_path)
            except (KnowledgeBaseError, OSError) as exc:
                gone = self._folder.lexical_path(file_path)
                if gone is not None and not os.path.lexists(gone):
                    # deleted while reconcile ran (a git checkout in progress): not a failure, and the deletion
                    # is the next run's (or the watcher's next batch's) to handle
                    log.debug("%s vanished during reconcile", file_path)
                    continue
                failed.append((file_path, str(exc)))
                log.warning("reconcile could not index %s: %s", file_path, exc)
        return ReconcileReport(added=tuple(added), updated=tuple(updated), unchanged=tuple(unchanged),
                               failed=tuple(failed))

    def _aliases(self, refused: Iterable[tuple[str, str]]) -> set[str]:
        """The display paths the scan skipped as other names of a file or folder (links, hard links)."""
        return {self._folder.display_path(rel) for rel, why in refused if isinstance(why, AliasReason)}

    def _settle_missing(self, rows: Sequence[DocumentRecord], delete_missing: bool,
                        aliases: set[str] = frozenset()) -> ReconcileReport:
        """Rows whose file is not on disk: reported, or (`delete_missing`) removed with their vectors and L0
        entry, under the document's lock. A row whose path holds something again (the file is back, or a link
        leading out, a FIFO) is never removed: removing would unlink what the user put there. A row kept under
        another name of a file (`aliases`: a link, or a path through a linked folder) is removed always, and
        nothing on disk is touched: the file is indexed under its own path."""
        removed: list[str] = []
        missing: list[str] = []
        dropped: list[str] = []
        failed: list[tuple[str, str]] = []
        for listed in rows:
            if listed.pending_operation is not None:
                continue  # a write in flight, or one recovery leaves to its live writer
            try:
                if self._is_alias(listed.file_path, aliases):
                    if self._drop_alias(listed.file_path):
                        dropped.append(listed.file_path)
                    continue
                if delete_missing and self._forget(listed.file_path):
                    removed.append(listed.file_path)
                else:
                    missing.append(listed.file_path)
            except KnowledgeBaseError as exc:
                failed.append((listed.file_path, str(exc)))
                log.warning("reconcile could not remove %s: %s", listed.file_path, exc)
        if removed:
            log.info("removed %d documents whose file had gone", len(removed))
        return ReconcileReport(removed=tuple(removed), missing_files=tuple(missing), failed=tuple(failed),
                               aliases=tuple(dropped))

    @staticmethod
    def _is_alias(file_path: str, aliases: set[str]) -> bool:
        """Whether `file_path` is one of `aliases` or lies under one (a linked folder)."""
        if not aliases:
            return False
        parts = file_path.split("/")
        return any("/".join(parts[:depth]) in aliases for depth in range(1, len(parts) + 1))

    def _drop_alias(self, file_path: str) -> bool:
        """Remove the row, vectors and L0 entry of a path that is another name of a file; the disk is left
        alone (the link is the user's, and the file it names has a row of its own). The row goes first: what a
        crash leaves behind (vectors without a row, an L0 entry the scan does not list) the next reconcile
        removes."""
        with self._service.locked(file_path):
            row = self._metadata.get_by_path(file_path)
            # checked again under the lock: an upload may have made it a file of its own since the scan
            if row is None or row.pending_operation is not None or not self._folder.is_other_name(file_path):
                return False
            self._metadata.delete_document(row.id)
            self._vectors.delete_document(row.id)
            self._l0.remove(file_path)
        log.warning("removed the row of %s: it is another name (a link) of a file indexed under its own path; "
                    "nothing on disk was touched", file_path)
        return True

    def _forget(self, file_path: str) -> bool:
        with self._service.locked(file_path):
            row = self._metadata.get_by_path(file_path)
            real = self._folder.lexical_path(file_path)
            if row is None or row.pending_operation is not None or real is None or os.path.lexists(real):
                return False
            self._metadata.set_pending(row.id, "delete", self._service.owner)
            self._service.finish_delete(row)
        log.info("removed %s: its file was deleted", file_path)
        return True

    def _reconcile_paths(self, paths: Iterable[str | os.PathLike[str]], delete_missing: bool) -> ReconcileReport:
        """Just these paths (files or folders; absolute, or display paths like `knowledge_base/api`). Files
        count by the scan's rules and the path rule (`KnowledgeFolder.scan`)."""
        relatives = {rel for rel in (self._folder.relative_of(p) for p in paths) if rel is not None}
        if not relatives:
            return ReconcileReport()
        whole = "" in relatives
        wanted = {self._folder.display_path(rel) for rel in relatives}
        folders = tuple(path + "/" for path in wanted)

        def concerned(file_path: str) -> bool:
            return whole or file_path in wanted or file_path.startswith(folders)

        documents, refused = self._folder.scan()
        listed = {p for rel in documents if concerned(p := self._folder.display_path(rel))}
        refused_here = tuple((p, why) for rel, why in refused if concerned(p := self._folder.display_path(rel)))
        try:
            known = [r for r in self._metadata.list_documents() if concerned(r.file_path)]
        except KnowledgeBaseError as exc:
            raise DocumentError("database", f"{exc}; nothing was reconciled") from exc
        failed: list[tuple[str, str]] = []
        rows: dict[str, DocumentRecord] = {}
        on_disk: list[str] = []
        for file_path in sorted(listed):
            try:
                with self._service.locked(file_path):  # a write of this path in flight finishes first
                    row = self._metadata.get_by_path(file_path)
            except KnowledgeBaseError as exc:
                failed.append((file_path, str(exc)))
                continue
            on_disk.append(file_path)
            if row is not None:
                rows[file_path] = row
        with self._l0.bulk():
            report = self._index_files(on_disk, rows, no_progress)
            report += self._settle_missing([r for r in known if r.file_path not in listed], delete_missing,
                                           self._aliases(refused))
        log.debug("reconcile of %d paths: %s", len(relatives), report.summary())
        return report + ReconcileReport(failed=tuple(failed), refused=refused_here)

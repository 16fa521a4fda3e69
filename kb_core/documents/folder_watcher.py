"""Watching the knowledge-base folder (`KB_WATCH=1`): files edited by hand or by `git pull` are indexed
without anyone pressing "Reconcile".

One process per knowledge base watches: the one holding the watcher lease in the database (a `named_lock`
taken without waiting).
The others try to take it every few seconds, so when the watcher's process exits another one takes over;
meanwhile they see the watcher's syncs through the change feed like any other write. The lease is checked
while it is held: a MySQL server may kill the connection, which silently drops `GET_LOCK`.

File events are debounced: editors write a temp file and rename it, `git pull` touches many files at once.
A batch is synced once the folder has been quiet for `debounce` seconds (or `max_delay` seconds after its
first event, so a long stream of events is not put off forever), through `reconcile(paths, delete_missing=True)`, under
the same per-document locks as uploads. Hidden files (temp files, `.git/`) and files that are not `.md` do
not start a sync. A failing sync is logged and reported in `last_report`; it never stops the watcher.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from kb_core.documents.folder import KnowledgeFolder
from kb_core.documents.reconcile import ReconcileReport
from kb_core.storage.ports import MetadataRepository

log = logging.getLogger(__name__)
# watchdog's inotify emitter logs this at ERROR when an observer is stopped while it waits for an event (a race
# inside watchdog 7, nothing lost): every step-down of a watcher would alarm the operator for nothing
logging.getLogger("watchdog.observers.inotify").addFilter(
    lambda record: "called when the thread is inactive" not in record.getMessage())
# and it warns when a folder created under a recursive watch (git makes .git/objects/xx/ on every commit) gets
# the callback it already has: the callback is the same one, nothing changes
warnings.filterwarnings("ignore", message="Callback with id .* already exists", category=RuntimeWarning,
                        module=r"watchdog\.observers\.inotify")

DEBOUNCE_SECONDS = 0.5
MAX_DELAY_SECONDS = 5.0
ELECTION_INTERVAL = 2.0  # how often a process that is not the watcher tries to become it
LEASE_CHECK_INTERVAL = 2.0

# "opened" and "closed_no_write" come from reading files, which the sync itself does: they must not start one
_CHANGES = {"created", "modified", "moved", "deleted", "closed"}
# a folder is "modified" whenever a file in it is: only its arrival or departure concerns its documents
_FOLDER_CHANGES = {"created", "moved", "deleted"}


class Lease(Protocol):
    def try_acquire(self) -> bool: ...

    def check(self) -> bool: ...

    def release(self) -> None: ...


def counts(path: str, base: str, is_directory: bool) -> bool:
    """Whether an event at `path` can concern a document: under the base with no hidden component (temp
    files, `.git/`), and a `.md` file or a folder (a folder moved or deleted takes its documents with it)."""
    if not path.startswith(base + os.sep):
        return False
    if any(part.startswith(".") for part in path[len(base) + 1:].split(os.sep)):
        return False
    return is_directory or path.lower().endswith(".md")


class _Collector(FileSystemEventHandler):
    def __init__(self, base: str, wake: threading.Condition, pending: set[str], times: list[float]):
        self._base = base
        self._wake = wake
        self._pending = pending
        self._times = times  # [first event of the batch, last event]

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in (_FOLDER_CHANGES if event.is_directory else _CHANGES):
            return
        paths = [os.fsdecode(event.src_path)]
        if event.event_type == "moved":
            paths.append(os.fsdecode(event.dest_path))
        wanted = [p for p in paths if counts(p, self._base, event.is_directory)]
        if not wanted:
            return
        now = time.monotonic()
        with self._wake:
            if not self._pending:
                self._times[0] = now
            self._pending.update(wanted)
            self._times[1] = now
            self._wake.notify()


class FolderWatcher:
    def __init__(
        self,
        base_dir: Path,
        sync: Callable[[list[str]], ReconcileReport],
        lease: Lease,
        *,
        catch_up: Callable[[], Iterable[str]] | None = None,
        debounce: float = DEBOUNCE_SECONDS,
        max_delay: float = MAX_DELAY_SECONDS,
        election_interval: float = ELECTION_INTERVAL,
        lease_check_interval: float = LEASE_CHECK_INTERVAL,
    ):
        self._base = str(base_dir)
        self._sync = sync
        self._catch_up = catch_up
        self.lease = lease
        self._debounce = debounce
        self._max_delay = max_delay
        self._election_interval = election_interval
        self._lease_check_interval = lease_check_interval
        self._wake = threading.Condition()
        self._pending: set[str] = set()
        self._times = [0.0, 0.0]
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._observer: BaseObserver | None = None
        self._next_check = 0.0
        self._catch_up_due = False
        self._watching = False
        self.terms = 0  # how many times this process became the watcher
        self.syncs = 0  # batches synced
        self.last_report: ReconcileReport | None = None
        self.last_error: str | None = None

    @property
    def is_watching(self) -> bool:
        """Whether this process is the knowledge base's watcher right now."""
        return self._watching

    def start(self) -> None:
        """The first election runs here, so `is_watching` is true or false (another process watches) as soon as
        the knowledge base is open; the catch-up sync and everything after run on the thread."""
        if self._thread is None:
            try:
                self._take_lead()
            except Exception as exc:  # noqa: BLE001 - the thread tries again
                log.warning("cannot start watching %s yet: %s", self._base, exc)
            self._thread = threading.Thread(target=self._run, name="kb-folder-watcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching and release the lease (another process takes over within its election interval)."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # -- the thread ------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping:
                try:
                    if self._watching and self._catch_up_due:
                        self._run_catch_up()
                    elif self._watching:
                        self._watch_once()
                    else:
                        self._elect()
                except Exception as exc:  # noqa: BLE001 - a dead watcher thread would silently stop all syncs
                    log.exception("the folder watcher hit an error and carries on: %s", exc)
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    self._pause(self._election_interval)
        finally:
            self._step_down()

    def _elect(self) -> None:
        if not self._take_lead():
            self._pause(self._election_interval)

    def _take_lead(self) -> bool:
        if not self.lease.try_acquire():
            return False
        try:
            self._observer = self._start_observer()
        except Exception:
            self.lease.release()
            raise
        self._watching = True
        self._catch_up_due = self._catch_up is not None
        self.terms += 1
        self._next_check = time.monotonic() + self._lease_check_interval
        log.info("this process now watches %s for changes (term %d)", self._base, self.terms)
        return True

    def _run_catch_up(self) -> None:
        """What changed while nobody watched (the last watcher exited with events still pending, a git pull
        between two watchers): the same incremental sync, over the paths that look changed."""
        self._catch_up_due = False
        assert self._catch_up is not None
        paths = sorted(self._catch_up())
        if paths:
            self._run_sync(paths, "catch-up")

    def _start_observer(self) -> BaseObserver:
        Path(self._base).mkdir(parents=True, exist_ok=True)
        handler = _Collector(self._base, self._wake, self._pending, self._times)
        observer: BaseObserver = Observer()
        try:
            observer.schedule(handler, self._base, recursive=True)
            observer.start()
        except OSError as exc:  # e.g. the inotify watch limit: polling is slower but still sees every change
            log.warning("cannot watch %s with the OS's notifications (%s); polling it instead", self._base, exc)
            observer = PollingObserver()
            observer.schedule(handler, self._base, recursive=True)
            observer.start()
        return observer

    def _watch_once(self) -> None:
        with self._wake:
            now = time.monotonic()
            wait = self._next_check - now
            if self._pending:
                due = min(self._times[1] + self._debounce, self._times[0] + self._max_delay)
                wait = min(wait, due - now)
            if wait > 0 and not self._stopping:
                self._wake.wait(wait)
                return
            batch: list[str] = []
            if self._pending and time.monotonic() >= min(self._times[1] + self._debounce,
                                                         self._times[0] + self._max_delay):
                batch = sorted(self._pending)
                self._pending.clear()
        if time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self._lease_check_interval
            if not self.lease.check():
                log.warning("this process lost the watcher lease (its database connection was closed?): it stops "
                            "watching %s and tries to become the watcher again", self._base)
                self._step_down()
                return
        if batch:
            self._run_sync(batch, "change")

    def _run_sync(self, paths: list[str], why: str) -> None:
        try:
            report = self._sync(paths)
        except Exception as exc:  # noqa: BLE001 - reported, and the next event tries again
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.error("watcher sync of %d paths failed: %s", len(paths), self.last_error)
            return
        self.syncs += 1
        self.last_report = report
        self.last_error = None
        indexed = len(report.added) + len(report.updated)
        if indexed or report.removed or report.failed:
            log.info("watcher synced %d files: %d indexed, %d removed (%s)", len(paths), indexed,
                     len(report.removed), why)
        for file_path, problem in report.failed:
            log.warning("watcher could not index %s: %s", file_path, problem)

    def _step_down(self) -> None:
        self._watching = False
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=10)
        with self._wake:
            self._pending.clear()
        self.lease.release()

    def _pause(self, seconds: float) -> None:
        with self._wake:
            if not self._stopping:
                self._wake.wait(seconds)


def paths_changed_while_unwatched(folder: KnowledgeFolder, metadata: MetadataRepository) -> list[str]:
    """What a new watcher syncs first: rows whose file is gone or was modified after the row was written, and
    files without a row modified after the newest row (a fresh checkout that was never synced is left to
    "Reconcile": indexing a whole folder is the curator's call, not a side effect of opening the console).
    Only file metadata is read; reconcile then compares content hashes."""
    rows = {r.file_path: r for r in metadata.list_documents()}
    newest = max((r.updated_at.timestamp() for r in rows.values()), default=None)
    stale: list[str] = []
    on_disk = set()
    for relative in folder.markdown_files():
        file_path = folder.display_path(relative)
        on_disk.add(file_path)
        modified = folder.modified_since(relative)
        if modified is None:
            continue
        row = rows.get(file_path)
        reference = row.updated_at.timestamp() if row is not None else newest
        if reference is not None and modified > reference:
            stale.append(file_path)
    stale.extend(path for path in rows if path not in on_disk)
    return stale

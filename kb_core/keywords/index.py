"""L0: the in-memory keyword index over every document's frontmatter (the spec's matching, scan and path).

This module owns the index's life: loading the entries of the folder's documents (the folder itself, its
paths and reads belong to `kb_core.documents.folder`, the synonyms file to `kb_core.documents.synonyms`),
adding and removing entries. Matching and ranking live in `matching` (the `words` rule by default, the
spec's literal `substring` rule as a mode).

Readers never lock. Writers build a new immutable view under a lock and then swap one reference, so a lookup
sees the index either before or after an upload, never half-way (the spirit of the spec's copy-on-write list,
docs/decisions.md). A change does not rebuild everything: the new view is the last full `Snapshot` plus a
delta of the changed entries (`delta.DeltaSnapshot`, answering exactly as a full rebuild would), built
in time of the change, not of the index. Once the delta holds `DELTA_LIMIT` changes, or changes settled (`SETTLE`
seconds after the last one, and at least ten times as long as the last full build took, so that a trickle of
changes does not keep a core rebuilding), a background thread builds the full snapshot and swaps it in (writers
go on meanwhile; their changes are replayed onto it). `bulk()` collects a batch of changes: a small batch is
applied as deltas at its end, a large one (a reconcile) rebuilds once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_core.documents import synonyms as synonyms_module
from kb_core.documents.folder import KnowledgeFolder, file_version, read_regular
from kb_core.documents.scope import Scope
from kb_core.errors import InvalidInputError
from kb_core.keywords import parallel_scan, snapshot_file
from kb_core.keywords.delta import DeltaSnapshot
from kb_core.keywords.entry import KnowledgeEntry, entry_of_bytes, entry_of_file, split_keywords
from kb_core.keywords.matching import MATCHING_MODES, L0Match, L0View, RankedMatches, Snapshot
from kb_core.terms import normalize_term

if TYPE_CHECKING:
    from kb_core.keywords.suggestions import Suggestion

log = logging.getLogger(__name__)

__all__ = ["KnowledgeEntry", "KnowledgeIndex", "L0Match", "LoadReport", "RankedMatches", "split_keywords"]


@dataclass
class _Tally:
    """What one scan met, filled in as it reads the files (so not frozen): the entries, the files' versions, the
    files it parsed again, which saved rows it met (1) and reused (2), and the counts of its report."""

    met: bytearray
    entries: list[KnowledgeEntry] = field(default_factory=list)
    records: dict[str, bytes] = field(default_factory=dict)  # display path (the entry's own string) -> version
    parsed: dict[str, KnowledgeEntry | None] = field(default_factory=dict)  # display path -> its entry now
    scanned: int = 0
    skipped: int = 0
    failed: int = 0
    reused: int = 0


@dataclass(frozen=True)
class LoadReport:
    scanned: int
    indexed: int
    skipped: int
    failed: int
    seconds: float
    # the files are exactly the saved snapshot's (nothing parsed, nothing gone): the tree is as a process that
    # closed cleanly left it
    as_saved: bool = False


class KnowledgeIndex:
    """The L0 index over the documents of a folder (`KnowledgeFolder`, built from `base_path` and `app_root`
    unless one is given)."""

    def __init__(self, base_path: str | os.PathLike[str] | None = None, *,
                 app_root: str | os.PathLike[str] | None = None, matching: str = "words",
                 folder: KnowledgeFolder | None = None, generic_docs: int | None = None,
                 synonyms: Sequence[Sequence[str]] = (), snapshot_path: str | os.PathLike[str] | None = None,
                 synonyms_file: synonyms_module.SynonymsFile | None = None):
        if matching not in MATCHING_MODES:
            raise ValueError(f"matching must be one of {', '.join(MATCHING_MODES)}, not {matching!r}")
        if folder is None:
            if base_path is None:
                raise ValueError("KnowledgeIndex needs a base path or a folder")
            folder = KnowledgeFolder(base_path, app_root=app_root)
        self._folder = folder
        self._matching = matching
        self._generic_docs = generic_docs
        self._configured_synonyms = synonyms_module.clean_groups([list(g) for g in synonyms], "l0.synonyms")
        self._file_synonyms: synonyms_module.Groups = ()
        self._merged_synonyms: tuple[synonyms_module.Groups | None, synonyms_module.Groups] = (None, ())
        self._synonyms_file = synonyms_file or synonyms_module.SynonymsFile(folder.base_dir)
        self._snapshot: L0View = Snapshot((), matching, generic_docs=generic_docs, synonyms=self.synonyms())
        # the positions each scope admits, for the current view only (rebuilt once per view and scope)
        self._masks: tuple[L0View | None, dict[Scope, np.ndarray]] = (None, {})
        self._write_lock = threading.RLock()
        self._warm_lock = threading.Lock()
        self._warming = False  # a background thread builds the current snapshot's suggester
        self._bulk_depth = 0
        # changes inside bulk(), not yet applied: (path, entry or None), in order; and the latest per path
        self._bulk_changes: list[tuple[str, KnowledgeEntry | None]] = []
        self._bulk_latest: dict[str, KnowledgeEntry | None] = {}
        self.delta_limit = self.DELTA_LIMIT
        self.settle = self.SETTLE
        self._changed_at = 0.0
        self._fold_seconds = 0.0  # how long the last full build in the background took
        self._fold_wake = threading.Event()
        self._folder_thread: threading.Thread | None = None
        # the changes applied while the background rebuild runs (replayed onto its snapshot); None: not running
        self._journal: list[tuple[str, KnowledgeEntry | None]] | None = None
        # The saved snapshot (snapshot_file): what each file held when this process last read it, by path
        # below the base; written a few seconds after changes settle, and at close.
        self._snapshot_path = Path(snapshot_path) if snapshot_path else None
        self._records: dict[str, bytes] = {}  # display path -> the file's version (`folder.file_version`)
        self._records_dirty = False
        # path -> hash of the version this process's own write put in L0 (`add(..., sha256=)`): when the change
        # feed brings that write back, `refresh` knows the entry already and reads nothing (a reconcile of
        # 1,000 new files re-read and parsed each of them on the follower's thread). Bounded: see `add`.
        self._written: dict[str, str] = {}
        # the last snapshot written lacks the search structures only because they were a delta: save again once
        # the background rebuild made them whole
        self._save_after_fold = False
        self._closed = False
        self._save_timer: threading.Timer | None = None
        self._changed_at = 0.0  # monotonic time of the last change the snapshot does not hold yet

    @property
    def folder(self) -> KnowledgeFolder:
        return self._folder

    # -- loading -------------------------------------------------------------------------------------
    def load(self) -> int:
        """Scan the base recursively and replace the index; returns the number of documents indexed."""
        return self.scan().indexed

    def scan(self) -> LoadReport:
        started = time.perf_counter()
        if self._records_dirty:  # what this process knows (own writes, an earlier scan) is reused, not parsed again
            self.save_snapshot()
        self._reload_file_synonyms()
        prefix = self._folder.display_prefix()
        saved, built = snapshot_file.load_with_index(self._snapshot_path, self._folder.base_dir, prefix) \
            if self._snapshot_path else (None, None)
        tally = self._read_files(saved, prefix)
        if saved is not None:
            # The records of the files the scan reused, made now rather than one by one among the scan's
            # short-lived strings: 100,000 small objects kept between freed ones would hold their memory pages.
            paths, entries_saved = saved.paths, saved.entries
            for row in (row for row, seen in enumerate(tally.met) if seen == 2):
                entry = entries_saved[row]
                tally.records[paths[row] if entry is None else entry.file_path] = saved.stat(row)
        self._install(saved, built, tally)
        seconds = time.perf_counter() - started
        log.info(
            "L0 index loaded from %s: scanned=%d indexed=%d skipped=%d failed=%d (%d unchanged since the saved "
            "snapshot) in %.1f ms", self._folder.display_path(""), tally.scanned, len(tally.entries), tally.skipped,
            tally.failed, tally.reused, seconds * 1000,
        )
        as_saved = saved is not None and tally.reused == len(saved.paths) == tally.scanned and not tally.failed
        return LoadReport(tally.scanned, len(tally.entries), tally.skipped, tally.failed, seconds, as_saved)

    def _reload_file_synonyms(self) -> None:
        try:  # the synonyms file lives with the documents: read it with them
            self._file_synonyms = self._synonyms_file.changed_groups(force=True) or ()
        except InvalidInputError as exc:
            log.warning("synonyms not loaded: %s", exc)

    def _read_files(self, saved: snapshot_file.Saved | None, prefix: str) -> _Tally:
        """Every file of the folder: a saved record whose file is unchanged since is reused as it is, the other
        files are parsed (by child processes when there are many)."""
        tally = _Tally(bytearray(len(saved.paths)) if saved is not None else bytearray())
        entries, met = tally.entries, tally.met
        stats: dict[str, bytes] = {}
        rows = saved.row if saved is not None else {}
        files = self._folder.scan(stats, accepted=lambda relative: prefix + relative in rows)[0]
        outcomes = self._parse_elsewhere(files, stats, saved, prefix)
        scanned = skipped = failed = reused = 0
        for relative in files:
            scanned += 1
            packed = stats.get(relative) or self._stat(relative)
            row = saved.row.get(prefix + relative) if saved is not None else None
            if row is not None:
                met[row] = 1
                if packed is not None and saved.unchanged(row, packed):  # unchanged since the snapshot: no parse
                    reused += 1
                    met[row] = 2  # its record is made after the scan (see `scan`)
                    entry = saved.entries[row]
                    if entry is None:
                        skipped += 1
                    else:
                        entries.append(entry)
                    continue
            display = prefix + relative
            entry, read = self._parse_one(relative, display, packed, outcomes, tally.records)
            tally.parsed[display] = entry
            if not read:
                failed += 1
            elif entry is None:
                skipped += 1
            else:
                entries.append(entry)
        tally.scanned, tally.skipped, tally.failed, tally.reused = scanned, skipped, failed, reused
        return tally

    def _parse_one(self, relative: str, display: str, packed: bytes | None,
                   outcomes: dict[str, parallel_scan.Outcome], records: dict[str, bytes]
                   ) -> tuple[KnowledgeEntry | None, bool]:
        """A file's entry (None: not an L0 document) and whether the file could be read; its version goes to
        `records` under the entry's path."""
        outcome = outcomes.pop(relative, None) if outcomes else None
        if outcome is not None:  # parsed by a child process: what it logged is logged here, in file order
            parallel_scan.replay(outcome)
            if outcome[0] == parallel_scan.UNREADABLE:  # (the text of its OSError / UnicodeDecodeError)
                log.warning("cannot read %s, skipped: %s", self._folder.display_path(relative), outcome[1])
                return None, False
        try:
            entry = entry_of_file(self._folder, relative) if outcome is None else \
                parallel_scan.entry_of_outcome(outcome)
            if packed is not None:
                records[display if entry is None else entry.file_path] = packed
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s, skipped: %s", self._folder.display_path(relative), exc)
            return None, False
        return entry, True

    def _install(self, saved: snapshot_file.Saved | None, built: Callable[[], Any] | None, tally: _Tally) -> None:
        """The scan's entries as the index: the saved search structures and a delta of what changed since when
        they fit, else a rebuild."""
        with self._write_lock:
            self._bulk_changes, self._bulk_latest = [], {}
            changes = self._changes_since(saved, tally.parsed, tally.met) \
                if saved is not None and built is not None else None
            index = built() if changes is not None else None
            if index is not None and self._fits(index, [e for e in saved.entries if e is not None]):
                # The saved search structures, and what changed since as a delta (folded in in the background):
                # an open after edits costs the files that changed, not a rebuild of every document's terms.
                self._journal = None
                self._swap(index)
                if changes:
                    self._apply(changes)
            else:
                self._rebuild(tuple(tally.entries))
            self._records = tally.records
            if saved is None or tally.reused != len(saved.paths) or tally.reused != tally.scanned or (
                    index is not None and not index.has_titles):  # an older format: saved anew, with the titles
                self._snapshot_changed()

    # A full scan of more files than this parses them in child processes (`parallel_scan`): None follows
    # `KB_L0_SCAN_PROCESSES` and the cores; 0 parses here.
    scan_processes: int | None = None

    def _parse_elsewhere(self, files: list[str], stats: dict[str, bytes], saved: snapshot_file.Saved | None,
                         prefix: str) -> dict[str, parallel_scan.Outcome]:
        """The parse of the files the scan must read (not the saved snapshot's unchanged ones), done by child
        processes when there are at least `parallel_scan.PARALLEL_FROM` of them; {} otherwise, or for what no
        child parsed (the loop parses that itself)."""
        if len(files) < parallel_scan.PARALLEL_FROM or type(self._folder) is not KnowledgeFolder:
            return {}
        processes = parallel_scan.scan_processes() if self.scan_processes is None else self.scan_processes
        if processes < 2:
            return {}
        if saved is not None:
            row_of, unchanged = saved.row.get, saved.unchanged

            def stale(relative: str) -> bool:
                row = row_of(prefix + relative)
                packed = stats.get(relative)
                return row is None or packed is None or not unchanged(row, packed)

            # An open from the snapshot finds a handful of changed files: a sample of ~2,000 says so for a
            # twentieth of the pass below, which at 100,000 files costs a quarter of a second. A run of k stale
            # files (a folder dropped in: they sort together) is met about k/step times, so only runs far below
            # the threshold go unseen, and those the loop parses itself either way.
            step = max(1, len(files) // 2000)
            if sum(map(stale, files[::step])) * step < parallel_scan.PARALLEL_FROM // 2:
                return {}
            files = [relative for relative in files if stale(relative)]
            if len(files) < parallel_scan.PARALLEL_FROM:
                return {}
        return parallel_scan.parse_files(self._folder, files, processes)

    def _changes_since(self, saved: snapshot_file.Saved, parsed: dict[str, KnowledgeEntry | None],
                       met: bytearray) -> list[tuple[str, KnowledgeEntry | None]] | None:
        """The changes that turn the saved entries into this scan's: the files parsed again that hold another
        entry now, and the saved documents whose files are gone. None when there are too many for a delta
        (more than `delta_limit` or 2 % of the documents: a full build is then as cheap)."""
        limit = max(self.delta_limit, len(saved.paths) // 50)
        changes: list[tuple[str, KnowledgeEntry | None]] = []
        for display, entry in parsed.items():
            row = saved.row.get(display)
            old = None if row is None else saved.entries[row]
            if entry != old:
                changes.append((display if entry is None else entry.file_path, entry))
        gone = [saved.paths[row] for row in range(len(met)) if not met[row] and saved.entries[row] is not None] \
            if met.count(0) else []
        changes += [(path, None) for path in gone]
        return changes if len(changes) <= limit else None

    def refresh(self, file_path: str, expected_sha256: str | None = None) -> bool:
        """Re-read one document as the scan would and add, replace or remove its entry. Nothing is rebuilt
        when the entry is unchanged (a process's own writes come back through the change feed). Returns
        whether the index changed.

        `expected_sha256` (the change feed's hash of the version it announces): when the file holds other bytes,
        a write is in flight or already newer, and reading it now could publish a version that is about to be
        rolled back; the entry is left as it is, and the feed brings the write that settles the file."""
        if expected_sha256 is not None and self._written.pop(file_path, None) == expected_sha256:
            return False  # this process's own write of that version: its entry is in L0 already
        folder = self._folder
        path = folder.lexical_path(file_path)
        entry = None
        if path is not None and folder.is_own_path(path):  # a regular file, not a link or a FIFO
            relative = path.relative_to(folder.base_dir).as_posix()
            try:
                if expected_sha256 is None:
                    entry = entry_of_file(folder, relative)
                else:
                    data = read_regular(path, max_bytes=folder.max_bytes)
                    if hashlib.sha256(data).hexdigest() != expected_sha256:
                        log.debug("%s is not the version the feed announced: left as it is", file_path)
                        return False
                    entry = entry_of_bytes(folder, relative, data)
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("cannot read %s, left out of L0: %s", file_path, exc)
        elif expected_sha256 is not None:
            return False  # announced but gone: a delete is in flight, and its own change follows
        with self._write_lock:
            if self._entry(file_path) == entry:
                return False
            if entry is None:
                return self.remove(file_path)
            self.add(entry)
            return True

    # -- updates -------------------------------------------------------------------------------------
    @property
    def matching(self) -> str:
        return self._matching

    DELTA_LIMIT = 256  # changes a delta holds before the full rebuild runs at once; 0: every change rebuilds
    SETTLE = 2.0  # seconds without a change before the delta is folded into a full rebuild (see `_settled_after`)
    FOLD_SHARE = 0.1  # ... and the background rebuild's share of the time when changes trickle in

    def _entry(self, file_path: str) -> KnowledgeEntry | None:
        """The entry at `file_path` as the changes so far leave it (those collected by `bulk()` included)."""
        if self._bulk_depth and file_path in self._bulk_latest:
            return self._bulk_latest[file_path]
        view = self._snapshot
        pos = view.position.get(file_path)
        return None if pos is None else view.entries[pos]

    def _change(self, file_path: str, entry: KnowledgeEntry | None) -> None:
        """Add or replace (`entry`) or remove (None) one entry: collected inside `bulk()`; otherwise applied as a
        delta, or with `delta_limit` 0 by a full rebuild (the index before deltas: benchmarks compare)."""
        if self._bulk_depth:
            self._bulk_changes.append((file_path, entry))
            self._bulk_latest[file_path] = entry
        elif self.delta_limit <= 0 or self._synonyms_changed():
            self._rebuild_with([(file_path, entry)])
        else:
            self._apply([(file_path, entry)])

    def _apply(self, changes: list[tuple[str, KnowledgeEntry | None]]) -> None:
        view = self._snapshot
        if not isinstance(view, DeltaSnapshot):
            view = DeltaSnapshot(view)
        delta = view.with_changes(changes)
        if self._journal is not None:
            self._journal.extend(changes)
        self._swap(delta)
        self._changed_at = time.monotonic()
        if delta.delta_size >= self.delta_limit:
            self._fold_wake.set()
        if self._folder_thread is None:
            self._folder_thread = threading.Thread(target=self._fold_when_due, name="kb-l0-rebuild", daemon=True)
            self._folder_thread.start()

    def _rebuild_with(self, changes: list[tuple[str, KnowledgeEntry | None]]) -> None:
        entries = {entry.file_path: entry for entry in self._snapshot.live_entries()}
        for file_path, entry in changes:
            if entry is None:
                entries.pop(file_path, None)
            else:
                entries[file_path] = entry  # a dict keeps the position of a replaced key
        self._rebuild(tuple(entries.values()))

    def _rebuild(self, entries: tuple[KnowledgeEntry, ...]) -> None:
        """Build a full snapshot now and swap it in (a background rebuild still running is moot)."""
        self._journal = None
        self._swap(self._new_snapshot(entries))

    def _new_snapshot(self, entries: tuple[KnowledgeEntry, ...]) -> Snapshot:
        # (no cache of normalised keywords kept between builds: at 100,000 documents it held ~20 MB for ~0.1 s)
        return Snapshot(entries, self._matching, None, self._generic_docs, self.synonyms())

    # -- the background rebuild ------------------------------------------------------------------------
    def _fold_when_due(self) -> None:
        """The rebuild thread: folds the delta into a full snapshot once it is large or changes settled; ends
        when there is no delta (the next change starts it again)."""
        while True:
            with self._write_lock:
                view = self._snapshot
                if not view.delta_size:
                    self._folder_thread = None
                    return
                wait = 0.0 if view.delta_size >= self.delta_limit else \
                    self._changed_at + self._settled_after() - time.monotonic()
                self._fold_wake.clear()
            if wait > 0:
                self._fold_wake.wait(wait)
                continue
            try:
                self._fold(view)
            except Exception:  # noqa: BLE001 - the delta keeps answering right; try again after the next pause
                log.exception("rebuilding the L0 snapshot in the background failed")
                with self._write_lock:
                    self._changed_at = time.monotonic()

    def _settled_after(self) -> float:
        """Seconds after the last change before the delta is folded in: `settle`, or longer when a full build
        costs more than `FOLD_SHARE` of that (about 1.5 s of CPU at 100,000 documents)."""
        return max(self.settle, self._fold_seconds / self.FOLD_SHARE)

    def _fold(self, view: L0View) -> bool:
        """Build `view` in full and swap it in, with the changes made meanwhile replayed onto it; True when it
        was swapped in (False: a full rebuild or a bulk end replaced everything first)."""
        journal: list[tuple[str, KnowledgeEntry | None]] = []
        with self._write_lock:
            if self._snapshot is not view:
                return False
            self._journal = journal
        folded: L0View = view.consolidated()  # the long part: no lock held (shared with the suggester's build)
        self._fold_seconds = view.build_seconds
        done = 0
        while True:
            with self._write_lock:
                if self._journal is not journal:
                    return False
                if done == len(journal):
                    self._journal = None
                    self._swap(folded)
                    if self._save_after_fold:
                        self._save_after_fold = False
                        self._snapshot_changed()
                    return True
                todo = journal[done:]
            if not isinstance(folded, DeltaSnapshot):
                folded = DeltaSnapshot(folded)
            folded = folded.with_changes(todo)
            done += len(todo)

    def compact(self) -> bool:
        """Fold the delta into a full snapshot now, on this thread (tests and benchmarks); True when it did."""
        view = self._snapshot
        return bool(view.delta_size) and self._fold(view)

    # -- the saved snapshot -----------------------------------------------------------------------------
    SAVE_AFTER = 3.0  # seconds without a change before the snapshot is written

    def _stat(self, relative: str) -> bytes | None:
        """The file's version (`folder.file_version`), or None when it cannot be read."""
        try:
            return file_version(os.stat(self._folder.base_dir / relative))
        except OSError:
            return None

    def _version_of(self, file_path: str, sha256: str) -> bytes | None:
        """The version (`file_version`) of the file at `file_path` when it holds the bytes hashed `sha256` and
        did not change while they were read (the entry made from those bytes is then the file's, as the scan
        would make it); None otherwise."""
        path = self._folder.lexical_path(file_path)
        if path is None or self._snapshot_path is None:
            return None
        try:
            before = file_version(os.stat(path))
            data = read_regular(path, max_bytes=self._folder.max_bytes)
            after = file_version(os.stat(path))
        except OSError:
            return None
        return before if before == after and hashlib.sha256(data).hexdigest() == sha256 else None

    def _forget(self, file_path: str) -> None:
        """An entry that did not come from reading its file here has no record: it is parsed at the next open."""
        if self._records.pop(file_path, None) is not None:
            self._snapshot_changed()

    def _snapshot_changed(self) -> None:
        if self._snapshot_path is None:
            return
        self._records_dirty = True
        self._changed_at = time.monotonic()
        if self._closed:
            return  # saved by the next close(), if any: nothing is written behind the owner's back after close
        # One timer at a time, which waits again while changes keep coming: a timer (a thread) per change cost
        # a reconcile of 1,000 new files a second of thread starts.
        if self._save_timer is None or not self._save_timer.is_alive():
            self._start_save_timer(self.SAVE_AFTER)

    def _start_save_timer(self, delay: float) -> None:
        self._save_timer = threading.Timer(delay, self._save_when_quiet)
        self._save_timer.daemon = True
        self._save_timer.start()

    def _save_when_quiet(self) -> None:
        """The timer: the snapshot is written once `SAVE_AFTER` seconds have passed without a change."""
        quiet = time.monotonic() - self._changed_at
        if self._closed:
            return
        if quiet < self.SAVE_AFTER:
            self._start_save_timer(self.SAVE_AFTER - quiet)
            return
        self.save_snapshot()
        if self._records_dirty and not self._closed:  # changed while it was written (this timer was still alive)
            self._start_save_timer(self.SAVE_AFTER)

    def _fits(self, built: object, entries: list[KnowledgeEntry]) -> bool:
        """Whether a saved, built snapshot is exactly what `_rebuild(entries)` would build now: of these very
        entry objects (unpickled with the records), in this order, under the same rule, generic limit and
        synonyms."""
        return (isinstance(built, Snapshot) and type(built) is Snapshot and len(built.entries) == len(entries)
                and built.matching == self._matching and built.generic_docs == self._generic_docs
                and built.synonyms == self.synonyms()
                and all(a is b for a, b in zip(built.entries, entries, strict=True)))

    def save_snapshot(self) -> bool:
        """Write the snapshot now if anything changed since the last one (the timer and `close()` call it);
        True when it wrote."""
        if self._snapshot_path is None:
            return False
        with self._write_lock:
            if not self._records_dirty:
                return False
            if self._bulk_depth:
                # A batch's records are in and its entries are not (readers see them at its end): saved now, its
                # new files would be recorded as no L0 document, and the next open would trust that. The end
                # of the batch saves.
                return False
            self._records_dirty = False
            view, own = self._snapshot, self._records
            # a record's entry is the view's (every change of an entry drops its record: `_forget`), in the
            # view's order, so that a full snapshot of them is saved with them
            records: dict[str, snapshot_file.Record] = {}
            for entry in view.live_entries():
                stat = own.get(entry.file_path)
                if stat is not None:
                    records[entry.file_path] = (stat, entry)
            for path, stat in own.items():
                if path not in records:
                    records[path] = (stat, None)  # a file that is not an L0 document
            saved = [entry for _stat, entry in records.values() if entry is not None]
            index = view if self._fits(view, saved) else None  # a delta, or entries without records: not saved
            self._save_after_fold = index is None and view.delta_size > 0 and len(saved) == view.count
        try:
            snapshot_file.save(self._snapshot_path, self._folder.base_dir, records, index,
                                  self._folder.display_prefix())
        except OSError as exc:
            log.warning("cannot write the L0 snapshot %s (the next open scans in full): %s", self._snapshot_path, exc)
            return False
        log.debug("L0 snapshot written: %d records", len(records))
        return True

    def discard(self) -> None:
        """Let go of this index without writing its snapshot (a look at the files that another index, opened
        after it, will own)."""
        self._closed = True
        if self._save_timer is not None:
            self._save_timer.cancel()

    def close(self) -> None:
        """Write the snapshot if anything changed; from now on no timer writes it (a later change is written by
        the next `close()`)."""
        self._closed = True
        if self._save_timer is not None:
            self._save_timer.cancel()
        self.save_snapshot()

    # -- synonyms ------------------------------------------------------------------------------------
    def synonyms(self) -> synonyms_module.Groups:
        """The synonym groups L0 applies: the knowledge base's `_synonyms.yaml`, then `l0.synonyms` (merged once
        per version of the file's groups: every applied change compares them with its snapshot's)."""
        file_groups, merged = self._merged_synonyms
        if file_groups is not self._file_synonyms:
            file_groups = self._file_synonyms
            merged = synonyms_module.merged(file_groups, self._configured_synonyms)
            self._merged_synonyms = (file_groups, merged)
        return merged

    def _synonyms_changed(self) -> bool:
        """Whether the current view was built with other synonym groups than `synonyms()` (a reload in a batch)."""
        current, built = self.synonyms(), self._snapshot.synonyms
        return built is not current and built != current

    def file_synonyms(self) -> synonyms_module.Groups:
        return self._file_synonyms

    def reload_synonyms(self, *, force: bool = False) -> bool:
        """Apply `_synonyms.yaml` again when it changed (another process or a hand edit; the documents'
        `SynonymsFile` tells) and rebuild the snapshot; True when it did. A broken file keeps the groups in use
        and logs why."""
        # read and applied under the lock: groups read before a save cannot land after the save's
        # (`use_synonyms`) and stay in use
        with self._write_lock:
            try:
                groups = self._synonyms_file.changed_groups(force=force)
            except InvalidInputError as exc:
                log.warning("synonyms not reloaded, keeping the groups in use: %s", exc)
                return False
            return groups is not None and self.use_synonyms(groups)

    def use_synonyms(self, groups: synonyms_module.Groups) -> bool:
        """Apply the synonyms file's `groups` (as just saved, or read again) and rebuild the snapshot; True when
        they differ from the groups in use."""
        with self._write_lock:
            if groups == self._file_synonyms:
                return False
            self._file_synonyms = groups
            if not self._bulk_changes:  # (the end of a bulk() with changes sees the new groups and rebuilds)
                self._rebuild(self._snapshot.live_entries())
        log.info("synonyms reloaded: %d group(s)", len(self.synonyms()))
        return True

    def _swap(self, snapshot: Snapshot) -> None:
        """Swap in a new snapshot. Once "did you mean" is in use (the current snapshot built its suggester), the
        new one's and its title table are built on a background thread (0.2 s at 10,000 documents): the write
        does not wait for them, and a burst of writes builds them once more, for the last snapshot only."""
        warm = self._snapshot.has_suggester
        self._snapshot = snapshot
        if warm:
            with self._warm_lock:
                if self._warming:
                    return  # the running build loops until the current snapshot has one
                self._warming = True
            threading.Thread(target=self._warm_suggester, name="kb-suggester", daemon=True).start()

    def warm_suggester(self) -> None:
        """Build the current snapshot's suggester now (on a background thread at open), so the first lookup that
        misses L0 does not pay for it; later snapshots then get theirs in the background too."""
        with self._warm_lock:
            if self._warming:
                return
            self._warming = True
        self._warm_suggester()

    def _warm_suggester(self) -> None:
        try:
            while True:
                snapshot = self._snapshot
                snapshot.suggester()
                snapshot.titled("")  # the title table too (0.7 s at 100,000 documents), off the lookup path
                with self._warm_lock:
                    if self._snapshot is snapshot:
                        self._warming = False
                        return
        except Exception:  # noqa: BLE001 - a lookup builds it on demand instead; never kill the writer's caller
            log.exception("building the did-you-mean index failed; lookups will build it on demand")
            with self._warm_lock:
                self._warming = False

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Batch many `add`/`remove` calls: readers see the old index until the end, which applies a batch of up
        to `delta_limit` changes as deltas and rebuilds once for a larger one."""
        with self._write_lock:
            self._bulk_depth += 1
        try:
            yield
        finally:
            with self._write_lock:
                self._bulk_depth -= 1
                if self._bulk_depth == 0 and self._bulk_changes:
                    changes, self._bulk_changes, self._bulk_latest = self._bulk_changes, [], {}
                    if len(changes) > self.delta_limit or self._synonyms_changed():
                        self._rebuild_with(changes)
                    else:
                        self._apply(changes)
                if self._bulk_depth == 0 and self._records_dirty:
                    self._snapshot_changed()  # (a save the batch held back)

    WRITTEN_MAX = 10_000  # own writes remembered for the change feed (forgetting one only costs a re-read)
    SCOPE_MASKS = 64  # scopes whose masks are kept for the current view (callers, filters)

    def add(self, entry: KnowledgeEntry, *, sha256: str | None = None) -> None:
        """Add an entry at the end, or replace the entry with the same `file_path` in place. The very entry L0
        holds already (a re-index of an unchanged file) changes nothing and rebuilds nothing: a rebuild is O(all
        documents) and its automaton holds the GIL, so a re-index of every document would rebuild L0 as often.
        `sha256`: the hash of the bytes the entry was made from, when a write of this process made it (the
        change feed then announces that version, and `refresh` need not read it; and the file's version is
        recorded as the scan records it, so the next opening, or the load that ends a reconcile, reuses the
        entry instead of parsing the file again)."""
        record = self._version_of(entry.file_path, sha256) if sha256 is not None else None
        with self._write_lock:
            self._forget(entry.file_path)
            self._change(entry.file_path, entry)
            if record is not None:
                self._records[entry.file_path] = record
                self._snapshot_changed()
            if sha256 is not None:
                if len(self._written) >= self.WRITTEN_MAX:
                    self._written.clear()
                self._written[entry.file_path] = sha256
            else:
                self._written.pop(entry.file_path, None)

    def remove_if_gone(self, file_path: str) -> bool:
        """A delete the change feed brings: remove the entry unless the file is on disk again. Every delete
        moves the file away before its row (and so its change) goes, so a file still there was written anew
        after the delete was read (a delete, then an upload or a reconcile of that path): removing its entry
        would hide the page until that write's own change came round; that change settles the entry."""
        path = self._folder.lexical_path(file_path)
        if path is not None and self._folder.is_own_path(path):
            return False
        return self.remove(file_path)

    def remove(self, file_path: str) -> bool:
        with self._write_lock:
            self._forget(file_path)
            self._written.pop(file_path, None)
            if self._entry(file_path) is None:
                return False
            self._change(file_path, None)
            return True

    # -- queries -------------------------------------------------------------------------------------
    def exact_match(self, query: str) -> list[KnowledgeEntry]:
        """Every document whose keywords match the query, in index order, each once (as the spec lists them)."""
        view = self._snapshot
        return [view.entries[p] for p in view.match(query).positions_in_index_order()]

    def match(self, query: str, scope: Scope | None = None) -> RankedMatches:
        """The matched documents, ranked (the lookup's primary is the first), with the keywords that matched
        each. A lazy sequence: `len()` is the total; only the items read are built. `scope`: only the documents
        it admits count (`documents.scope`), before anything is ranked or counted."""
        view = self._snapshot
        return view.match(query if isinstance(query, str) else "", self.scope_mask(scope, view))

    def scope_mask(self, scope: Scope | None, view: L0View | None = None) -> np.ndarray | None:
        """Which positions of the current view `scope` admits (None: every one). Built once per view and scope,
        one test per distinct (category, language, audience) - a fraction of a millisecond per 1,000 documents."""
        if scope is None or scope.everything:
            return None
        view = view or self._snapshot
        owner, masks = self._masks
        if owner is not view:
            masks = {}
            self._masks = (view, masks)
        mask = masks.get(scope)
        if mask is None:
            if len(masks) >= self.SCOPE_MASKS:
                masks.clear()
            mask = masks[scope] = view.scope_mask(scope.admits_entry)
        return mask

    def in_scope(self, scope: Scope | None) -> int | None:
        """How many documents `scope` admits (None: no scope, all of them)."""
        mask = self.scope_mask(scope)
        return None if mask is None else int(np.count_nonzero(mask))

    def suggest(self, query: str, limit: int = 3, lang: str | None = None) -> list[Suggestion]:
        """"Did you mean": keywords a typing slip away from the identifiers of a query that hit nothing
        (`kb_core.keywords.suggestions`). The suggester is built on first use (or by `warm_suggester`); from then
        on a background thread builds each new snapshot's."""
        return self._snapshot.suggester().suggest(query, limit, lang)

    def titled(self, query: str, scope: Scope | None = None) -> list[KnowledgeEntry]:
        """The documents whose title equals the query (normalised): a curated name, weighed like a keyword by
        lookups that only mention keywords or match none (only those `scope` admits)."""
        view = self._snapshot
        term = normalize_term(query) if isinstance(query, str) else ""
        found = [view.entries[view.position[p]] for p in view.titled(term) if p in view.position] if term else []
        return found if scope is None or scope.everything else [e for e in found if scope.admits_entry(e)]

    def get(self, file_path: str) -> KnowledgeEntry | None:
        view = self._snapshot
        pos = view.position.get(file_path)
        return None if pos is None else view.entries[pos]

    def versions(self, file_path: str, scope: Scope | None = None) -> tuple[KnowledgeEntry, ...]:
        """Every language version of a document's page (itself included), in index order (only those `scope`
        admits)."""
        view = self._snapshot
        pos = view.position.get(file_path)
        if pos is None:
            return ()
        members = view.group_members.get(int(view.group_of[pos]), (pos,))
        found = tuple(view.entries[i] for i in members)
        return found if scope is None or scope.everything else tuple(e for e in found if scope.admits_entry(e))

    @property
    def snapshot(self) -> Snapshot:
        """The current index as a full immutable snapshot (the keyword map is computed once per snapshot). With
        a delta pending it is built on first use (and shared with the background rebuild)."""
        return self._snapshot.consolidated()

    @property
    def view(self) -> L0View:
        """The current view as lookups see it: a full snapshot, or one with a delta over it."""
        return self._snapshot

    def claimants(self, keyword: str, *, page: str = "") -> list[str]:
        """Documents whose keywords equal `keyword` after normalisation, except the versions of `page` (a
        translation group key: the other languages of one page are not rival claimants)."""
        view = self._snapshot
        return [view.entries[p].file_path for p in view.claimed_by(keyword)
                if not page or view.entries[p].group != page]

    def entries(self) -> list[KnowledgeEntry]:
        return list(self._snapshot.live_entries())

    def __len__(self) -> int:
        return self._snapshot.count

    def __contains__(self, file_path: object) -> bool:
        return file_path in self._snapshot.position

    def excerpt(self, file_path: str, max_chars: int = 2000, *, clean: bool = False) -> str | None:
        """The text, cut to `max_chars` characters plus "..." when longer (the spec's cut; -1: all of it); `clean=True`
        (answers) drops boilerplate first. `None` when the file is missing or outside the base (see
        `KnowledgeFolder.read_text`)."""
        return self._folder.read_text(file_path, max_chars, clean=clean)

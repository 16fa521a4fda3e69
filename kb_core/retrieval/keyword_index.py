"""L0: the in-memory keyword index over every document's frontmatter (Specs 3, 6, 9).

This module owns the index's life: loading the entries of the folder's documents (the folder itself, its
paths and reads belong to `kb_core.documents.folder`), adding and removing entries. Matching and ranking live
in `keyword_matching` (the `words` rule by default, the spec's literal `substring` rule as a mode).

Readers never lock. Writers build a new immutable snapshot under a lock — completely, search structures
included — and then swap one reference, so a lookup sees the index either before or after an upload, never
half-way (the spirit of decision I2's CopyOnWriteArrayList), and the first lookup after a change is as fast
as any other. `bulk()` defers the rebuild to the end of a batch of changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kb_core.documents import synonyms as synonyms_module
from kb_core.documents.entry import KnowledgeEntry, entry_of_bytes, entry_of_file, split_keywords
from kb_core.documents.folder import KnowledgeFolder, read_regular
from kb_core.errors import InvalidInputError
from kb_core.retrieval import l0_snapshot_file
from kb_core.retrieval.keyword_matching import MATCHING_MODES, L0Match, RankedMatches, Snapshot

if TYPE_CHECKING:
    from kb_core.retrieval.suggestions import Suggestion

log = logging.getLogger(__name__)

__all__ = ["KnowledgeEntry", "KnowledgeIndex", "L0Match", "LoadReport", "RankedMatches", "split_keywords"]


@dataclass(frozen=True)
class LoadReport:
    scanned: int
    indexed: int
    skipped: int
    failed: int
    seconds: float


class KnowledgeIndex:
    """The L0 index over the documents of a folder (`KnowledgeFolder`, built from `base_path` and `app_root`
    unless one is given)."""

    def __init__(self, base_path: str | os.PathLike[str] | None = None, *,
                 app_root: str | os.PathLike[str] | None = None, matching: str = "words",
                 folder: KnowledgeFolder | None = None, generic_docs: int | None = None,
                 synonyms: Sequence[Sequence[str]] = (), snapshot_path: str | os.PathLike[str] | None = None):
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
        self._synonym_signature: tuple[int, int] | None = None
        self._snapshot = Snapshot((), matching, generic_docs=generic_docs)
        self._write_lock = threading.RLock()
        self._warm_lock = threading.Lock()
        self._warming = False  # a background thread builds the current snapshot's suggester
        self._bulk_depth = 0
        # entries changed inside bulk(), not yet built: path -> entry, in index order
        self._pending: dict[str, KnowledgeEntry] | None = None
        self._normalized: dict[str, str] = {}  # keyword -> normalised, reused by every rebuild
        # The saved snapshot (l0_snapshot_file): what each file held when this process last read it, by path
        # below the base; written a few seconds after changes settle, and at close.
        self._snapshot_path = Path(snapshot_path) if snapshot_path else None
        self._records: dict[str, l0_snapshot_file.Record] = {}
        self._records_dirty = False
        self._save_timer: threading.Timer | None = None

    @property
    def folder(self) -> KnowledgeFolder:
        return self._folder

    # -- loading -------------------------------------------------------------------------------------
    def load(self) -> int:
        """Scan the base recursively and replace the index; returns the number of documents indexed."""
        return self.scan().indexed

    def scan(self) -> LoadReport:
        started = time.perf_counter()
        try:  # the synonyms file lives with the documents: read it with them
            self._file_synonyms = synonyms_module.load_file(self._folder.base_dir)
        except InvalidInputError as exc:
            log.warning("synonyms not loaded: %s", exc)
        self._synonym_signature = synonyms_module.file_signature(self._folder.base_dir)
        entries: list[KnowledgeEntry] = []
        scanned = skipped = failed = reused = 0
        saved = l0_snapshot_file.load(self._snapshot_path, self._folder.base_dir) if self._snapshot_path else None
        records: dict[str, l0_snapshot_file.Record] = {}
        for relative in self._folder.markdown_files():
            scanned += 1
            stat = self._stat(relative)
            record = saved.get(relative) if saved is not None and stat is not None else None
            if record is not None and record[:4] == stat:  # unchanged since the snapshot: no parse
                reused += 1
                records[relative] = record
                if record[4] is None:
                    skipped += 1
                else:
                    entries.append(record[4])
                continue
            try:
                entry = entry_of_file(self._folder, relative)
                if stat is not None:
                    records[relative] = (*stat, entry)
            except (OSError, UnicodeDecodeError) as exc:
                failed += 1
                log.warning("cannot read %s, skipped: %s", self._folder.display_path(relative), exc)
                continue
            if entry is None:
                skipped += 1
                continue
            entries.append(entry)
        with self._write_lock:
            self._pending = None
            self._swap(self._new_snapshot(tuple(entries)))
            self._records = records
            if saved is None or reused != len(saved) or reused != scanned:
                self._snapshot_changed()
        seconds = time.perf_counter() - started
        log.info(
            "L0 index loaded from %s: scanned=%d indexed=%d skipped=%d failed=%d (%d unchanged since the saved "
            "snapshot) in %.1f ms", self._folder.display_path(""), scanned, len(entries), skipped, failed, reused,
            seconds * 1000,
        )
        return LoadReport(scanned, len(entries), skipped, failed, seconds)

    def refresh(self, file_path: str, expected_sha256: str | None = None) -> bool:
        """Re-read one document as the scan would and add, replace or remove its entry. Nothing is rebuilt
        when the entry is unchanged (a process's own writes come back through the change feed). Returns
        whether the index changed.

        `expected_sha256` (the change feed's hash of the version it announces): when the file holds other bytes,
        a write is in flight or already newer, and reading it now could publish a version that is about to be
        rolled back; the entry is left as it is, and the feed brings the write that settles the file."""
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
            if self._held(file_path) == entry:  # no dict of every entry per change: a re-index announces all
                return False
            if entry is None:
                return self.remove(file_path)
            self.add(entry)
            return True

    # -- updates -------------------------------------------------------------------------------------
    @property
    def matching(self) -> str:
        return self._matching

    def _held(self, file_path: str) -> KnowledgeEntry | None:
        """The entry L0 holds for `file_path` now (the one collected inside `bulk()`, else the published one)."""
        return self._pending.get(file_path) if self._pending is not None else self.get(file_path)

    def _current_entries(self) -> dict[str, KnowledgeEntry]:
        if self._pending is not None:
            return self._pending
        return {entry.file_path: entry for entry in self._snapshot.entries}

    def _publish(self, entries: dict[str, KnowledgeEntry]) -> None:
        """Build the new snapshot completely, then swap it in (or keep collecting inside `bulk()`)."""
        if self._bulk_depth:
            self._pending = entries
        else:
            self._pending = None
            if len(self._normalized) > 4 * sum(len(e.keywords) for e in entries.values()) + 1024:
                self._normalized = {}  # keywords of removed documents pile up: start afresh now and then
            self._swap(self._new_snapshot(tuple(entries.values())))

    def _new_snapshot(self, entries: tuple[KnowledgeEntry, ...]) -> Snapshot:
        return Snapshot(entries, self._matching, self._normalized, self._generic_docs, self.synonyms())

    # -- the saved snapshot -----------------------------------------------------------------------------
    SAVE_AFTER = 3.0  # seconds without a change before the snapshot is written

    def _stat(self, relative: str) -> tuple[int, int, int, int] | None:
        """What tells a file's versions apart without reading it: size, modification and change time, and the
        inode (a file renamed onto another path keeps its own, so it never passes for the one it replaced)."""
        try:
            stat = os.stat(self._folder.base_dir / relative)
        except OSError:
            return None
        return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino

    def _forget(self, file_path: str) -> None:
        """An entry that did not come from reading its file here has no record: it is parsed at the next open."""
        relative = self._folder.relative_of(file_path)
        if relative and self._records.pop(relative, None) is not None:
            self._snapshot_changed()

    def _snapshot_changed(self) -> None:
        if self._snapshot_path is None:
            return
        self._records_dirty = True
        if self._save_timer is not None:
            self._save_timer.cancel()
        self._save_timer = threading.Timer(self.SAVE_AFTER, self.save_snapshot)
        self._save_timer.daemon = True
        self._save_timer.start()

    def save_snapshot(self) -> bool:
        """Write the snapshot now if anything changed since the last one (the timer and `close()` call it);
        True when it wrote."""
        if self._snapshot_path is None:
            return False
        with self._write_lock:
            if not self._records_dirty:
                return False
            records = dict(self._records)
            self._records_dirty = False
        try:
            l0_snapshot_file.save(self._snapshot_path, self._folder.base_dir, records)
        except OSError as exc:
            log.warning("cannot write the L0 snapshot %s (the next open scans in full): %s", self._snapshot_path, exc)
            return False
        log.debug("L0 snapshot written: %d records", len(records))
        return True

    def close(self) -> None:
        if self._save_timer is not None:
            self._save_timer.cancel()
        self.save_snapshot()

    # -- synonyms ------------------------------------------------------------------------------------
    def synonyms(self) -> synonyms_module.Groups:
        """The synonym groups L0 applies: the knowledge base's `_synonyms.yaml`, then `l0.synonyms`."""
        return synonyms_module.merged(self._file_synonyms, self._configured_synonyms)

    def file_synonyms(self) -> synonyms_module.Groups:
        return self._file_synonyms

    def reload_synonyms(self, *, force: bool = False) -> bool:
        """Read `_synonyms.yaml` again when it changed (size or time; another process or a hand edit) and
        rebuild the snapshot; True when it did. A broken file keeps the groups in use and logs why."""
        signature = synonyms_module.file_signature(self._folder.base_dir)
        if not force and signature == self._synonym_signature:
            return False
        try:
            groups = synonyms_module.load_file(self._folder.base_dir)
        except InvalidInputError as exc:
            log.warning("synonyms not reloaded, keeping the groups in use: %s", exc)
            self._synonym_signature = signature
            return False
        with self._write_lock:
            self._synonym_signature = signature
            if groups == self._file_synonyms and not force:
                return False
            self._file_synonyms = groups
            if self._pending is None:
                self._swap(self._new_snapshot(self._snapshot.entries))
        log.info("synonyms reloaded: %d group(s)", len(self.synonyms()))
        return True

    def save_synonyms(self, groups: synonyms_module.Groups) -> None:
        """Write `_synonyms.yaml` (atomically) and apply it here at once; other processes reload it within
        seconds (their follower polls the file)."""
        with self._write_lock:
            synonyms_module.save_file(self._folder.base_dir, groups)
            self.reload_synonyms(force=True)

    def _swap(self, snapshot: Snapshot) -> None:
        """Swap in a new snapshot. Once "did you mean" is in use (the current snapshot built its suggester), the
        new one's is built on a background thread (0.2 s at 10,000 documents): the write does not wait for it,
        and a burst of writes builds it once more, for the last snapshot, not once per write."""
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
        """Batch many `add`/`remove` calls into one rebuild at the end (readers see the old index until then)."""
        with self._write_lock:
            self._bulk_depth += 1
        try:
            yield
        finally:
            with self._write_lock:
                self._bulk_depth -= 1
                if self._bulk_depth == 0 and self._pending is not None:
                    self._publish(self._pending)

    def add(self, entry: KnowledgeEntry) -> None:
        """Add an entry at the end, or replace the entry with the same `file_path` in place. The very entry L0
        holds already (a re-index of an unchanged file) changes nothing and rebuilds nothing: a rebuild is O(all
        documents) and its automaton holds the GIL, so a re-index of every document would rebuild L0 as often."""
        with self._write_lock:
            self._forget(entry.file_path)
            if self._held(entry.file_path) == entry:
                return
            entries = self._current_entries()
            entries[entry.file_path] = entry  # a dict keeps the position of a replaced key
            self._publish(entries)

    def remove(self, file_path: str) -> bool:
        with self._write_lock:
            self._forget(file_path)
            entries = self._current_entries()
            if entries.pop(file_path, None) is None:
                return False
            self._publish(entries)
            return True

    # -- queries -------------------------------------------------------------------------------------
    def exact_match(self, query: str) -> list[KnowledgeEntry]:
        """Every document whose keywords match the query, in index order, each once (Spec 3.2)."""
        snapshot = self._snapshot
        return [snapshot.entries[p] for p in snapshot.match(query).positions_in_index_order()]

    def match(self, query: str) -> RankedMatches:
        """The matched documents, ranked (the lookup's primary is the first), with the keywords that matched
        each. A lazy sequence: `len()` is the total; only the items read are built."""
        return self._snapshot.match(query if isinstance(query, str) else "")

    def suggest(self, query: str, limit: int = 3, lang: str | None = None) -> list[Suggestion]:
        """"Did you mean": keywords a typing slip away from the identifiers of a query that hit nothing
        (`kb_core.retrieval.suggestions`). The suggester is built on first use (or by `warm_suggester`); from then
        on a background thread builds each new snapshot's."""
        return self._snapshot.suggester().suggest(query, limit, lang)

    def get(self, file_path: str) -> KnowledgeEntry | None:
        snapshot = self._snapshot
        pos = snapshot.position.get(file_path)
        return None if pos is None else snapshot.entries[pos]

    def versions(self, file_path: str) -> tuple[KnowledgeEntry, ...]:
        """Every language version of a document's page (itself included), in index order."""
        snapshot = self._snapshot
        pos = snapshot.position.get(file_path)
        if pos is None:
            return ()
        members = snapshot.group_members.get(int(snapshot.group_of[pos]), (pos,))
        return tuple(snapshot.entries[i] for i in members)

    @property
    def snapshot(self) -> Snapshot:
        """The current immutable snapshot (the keyword map is computed once per snapshot)."""
        return self._snapshot

    def claimants(self, keyword: str, *, page: str = "") -> list[str]:
        """Documents whose keywords equal `keyword` after normalisation, except the versions of `page` (a
        translation group key: the other languages of one page are not rival claimants)."""
        snapshot = self._snapshot
        return [snapshot.entries[p].file_path for p in snapshot.claimed_by(keyword)
                if not page or snapshot.entries[p].group != page]

    def entries(self) -> list[KnowledgeEntry]:
        return list(self._snapshot.entries)

    def __len__(self) -> int:
        return len(self._snapshot.entries)

    def __contains__(self, file_path: object) -> bool:
        return file_path in self._snapshot.position

    def read_document(self, file_path: str, max_chars: int = 2000, *, clean: bool = False) -> str | None:
        """The text, cut to `max_chars` characters plus "..." when longer (Spec 3.3); `clean=True` (answers)
        drops boilerplate first. `None` when the file is missing or outside the base (see
        `KnowledgeFolder.read_text`)."""
        return self._folder.read_text(file_path, max_chars, clean=clean)

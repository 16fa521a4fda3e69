"""L0: the in-memory keyword index over every document's frontmatter (Specs 3, 6, 9).

This module owns the index's life: scanning the base folder, adding and removing entries, paths, and reading
a document for an answer. Matching and ranking live in `keyword_matching` (the `words` rule by default, the
spec's literal `substring` rule as a mode).

Readers never lock. Writers build a new immutable snapshot under a lock — completely, search structures
included — and then swap one reference, so a lookup sees the index either before or after an upload, never
half-way (the spirit of decision I2's CopyOnWriteArrayList), and the first lookup after a change is as fast
as any other. `bulk()` defers the rebuild to the end of a batch of changes.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kb_core.documents.cleaning import clean_document
from kb_core.documents.frontmatter import MAX_BLOCK_BYTES, Frontmatter, parse_frontmatter
from kb_core.documents.sections import outline
from kb_core.retrieval.keyword_matching import MATCHING_MODES, L0Match, RankedMatches, Snapshot
from kb_core.settings import resolve_path
from kb_core.terms import MAX_KEYWORDS, weak_keyword_reason

log = logging.getLogger(__name__)

__all__ = ["KnowledgeEntry", "KnowledgeIndex", "L0Match", "LoadReport", "RankedMatches"]


@dataclass(frozen=True)
class KnowledgeEntry:
    file_path: str
    title: str
    keywords: tuple[str, ...]  # what L0 matches
    summary: str
    category: str | None = None
    # frontmatter keywords L0 ignores, with the reason: weak ones (`e`, `的`, `1`) and any beyond the 64th
    ignored_keywords: tuple[tuple[str, str], ...] = ()
    # `availableSections`, computed when the entry is built (never at lookup time); None: no headings
    sections: tuple[str, ...] | None = None
    # frontmatter `sections` found in the body: (curator's name, heading path)
    section_names: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_frontmatter(cls, file_path: str, fm: Frontmatter, category: str | None = None,
                         content: str | None = None) -> KnowledgeEntry:
        """`content` (the whole document) gives the entry its section list."""
        kept, ignored = split_keywords(fm.keywords)
        shape = outline(content, fm.sections) if content is not None else None
        return cls(
            file_path=file_path,
            title=fm.title,
            keywords=kept,
            summary=fm.summary,
            category=category or fm.category,
            ignored_keywords=ignored,
            sections=shape.listed if shape else None,
            section_names=shape.names if shape else (),
        )


def split_keywords(keywords: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the keywords L0 uses, [(ignored keyword, why)]): weak keywords and any beyond the 64th are ignored."""
    kept: list[str] = []
    ignored: list[tuple[str, str]] = []
    for keyword in keywords:
        reason = weak_keyword_reason(keyword)
        if reason is None and len(kept) >= MAX_KEYWORDS:
            reason = f"more than {MAX_KEYWORDS} keywords"
        if reason is None:
            kept.append(keyword)
        else:
            ignored.append((keyword, reason))
    return tuple(kept), tuple(ignored)


@dataclass(frozen=True)
class LoadReport:
    scanned: int
    indexed: int
    skipped: int
    failed: int
    seconds: float


_HEAD_BYTES = MAX_BLOCK_BYTES + 8 * 1024  # the frontmatter limit plus room for its delimiters


def _read_head(path: Path) -> tuple[str, bool]:
    """The start of a file, enough for any acceptable frontmatter block, and whether that is the whole file:
    the scan reads the rest only for documents that have frontmatter (their section list needs it)."""
    with open(path, "rb") as handle:
        return _decode_head(handle.read(_HEAD_BYTES))


def _decode_head(data: bytes) -> tuple[str, bool]:
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    complete = len(data) < _HEAD_BYTES
    return decoder.decode(data[:_HEAD_BYTES], final=complete), complete


class KnowledgeIndex:
    """The L0 index. `base_path` is kept as configured for display paths (`knowledge_base/api/x.md`) and
    resolved against `app_root` (default: the current directory) for disk access."""

    def __init__(self, base_path: str | os.PathLike[str], *, app_root: str | os.PathLike[str] | None = None,
                 matching: str = "words"):
        if matching not in MATCHING_MODES:
            raise ValueError(f"matching must be one of {', '.join(MATCHING_MODES)}, not {matching!r}")
        self._matching = matching
        configured = PurePosixPath(Path(base_path).as_posix())
        root = Path(app_root) if app_root is not None else Path.cwd()
        self._display_base = configured
        self._app_root = root
        self._base = resolve_path(base_path, root)
        self._snapshot = Snapshot((), matching)
        self._write_lock = threading.RLock()
        self._bulk_depth = 0
        # entries changed inside bulk(), not yet built: path -> entry, in index order
        self._pending: dict[str, KnowledgeEntry] | None = None
        self._normalized: dict[str, str] = {}  # keyword -> normalised, reused by every rebuild
        self._warned: set[tuple[str, str]] = set()

    # -- paths ---------------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """The base directory on disk."""
        return self._base

    def display_path(self, relative: str | os.PathLike[str]) -> str:
        """`knowledge_base/api/x.md` for `api/x.md`: the base as configured joined with the relative path."""
        return str(self._display_base / PurePosixPath(Path(relative).as_posix()))

    def resolve(self, file_path: str | os.PathLike[str]) -> Path | None:
        """The real path of a display path (or an absolute one), or `None` when it lies outside the base."""
        candidate = resolve_path(file_path, self._app_root)
        try:
            real = candidate.resolve()
            base = self._base.resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        return real if real.is_relative_to(base) and real != base else None

    def lexical_path(self, file_path: str) -> Path | None:
        """The on-disk path of a display path *without* following links (what to unlink), or `None` when it is
        not under the base or its folder resolves outside it."""
        prefix = str(self._display_base) + "/"
        if not isinstance(file_path, str) or not file_path.startswith(prefix):
            return None
        relative = PurePosixPath(file_path[len(prefix):])
        if ".." in relative.parts or relative.is_absolute():
            return None
        path = self._base / relative
        return path if self.is_inside(path.parent) else None

    def relative_path(self, file_path: str | os.PathLike[str]) -> str | None:
        real = self.resolve(file_path)
        return None if real is None else real.relative_to(self._base.resolve()).as_posix()

    # -- loading -------------------------------------------------------------------------------------
    def load(self) -> int:
        """Scan the base recursively and replace the index; returns the number of documents indexed."""
        return self.scan().indexed

    def scan(self) -> LoadReport:
        started = time.perf_counter()
        if not self._base.exists():
            self._base.mkdir(parents=True, exist_ok=True)
            log.info("created missing knowledge base directory %s", self._base)
        entries: list[KnowledgeEntry] = []
        scanned = skipped = failed = 0
        for relative in self.markdown_files():
            scanned += 1
            try:
                entry = self._entry_of(relative)
            except (OSError, UnicodeDecodeError) as exc:
                failed += 1
                log.warning("cannot read %s, skipped: %s", self.display_path(relative), exc)
                continue
            if entry is None:
                skipped += 1
                continue
            entries.append(entry)
        with self._write_lock:
            self._pending = None
            self._snapshot = Snapshot(tuple(entries), self._matching, self._normalized)
        seconds = time.perf_counter() - started
        log.info(
            "L0 index loaded from %s: scanned=%d indexed=%d skipped=%d failed=%d in %.1f ms",
            self._display_base, scanned, len(entries), skipped, failed, seconds * 1000,
        )
        return LoadReport(scanned, len(entries), skipped, failed, seconds)

    def _entry_of(self, relative: str) -> KnowledgeEntry | None:
        """One file's L0 entry, read the way the scan reads it (the head only); `None` without frontmatter."""
        display = self.display_path(relative)
        head, complete = _read_head(self._base / relative)
        fm = parse_frontmatter(head, source=display)
        if fm is None:
            return None
        if not complete:
            head = (self._base / relative).read_bytes().decode("utf-8-sig")
        return KnowledgeEntry.from_frontmatter(display, fm, self.category_of(relative), head)

    def _entry_from(self, relative: str, data: bytes) -> KnowledgeEntry | None:
        """`_entry_of` on bytes already read (parsed from the same head the scan would read)."""
        display = self.display_path(relative)
        head, _complete = _decode_head(data)
        fm = parse_frontmatter(head, source=display)
        if fm is None:
            return None
        return KnowledgeEntry.from_frontmatter(display, fm, self.category_of(relative), data.decode("utf-8-sig"))

    def refresh(self, file_path: str, expected_sha256: str | None = None) -> bool:
        """Re-read one document as the scan would and add, replace or remove its entry. Nothing is rebuilt
        when the entry is unchanged (a process's own writes come back through the change feed). Returns
        whether the index changed.

        `expected_sha256` (the change feed's hash of the version it announces): when the file holds other bytes,
        a write is in flight or already newer, and reading it now could publish a version that is about to be
        rolled back; the entry is left as it is, and the feed brings the write that settles the file."""
        path = self.lexical_path(file_path)
        entry = None
        if path is not None and path.is_file() and self.is_inside(path):
            relative = path.relative_to(self._base).as_posix()
            try:
                if expected_sha256 is None:
                    entry = self._entry_of(relative)
                else:
                    data = path.read_bytes()
                    if hashlib.sha256(data).hexdigest() != expected_sha256:
                        log.debug("%s is not the version the feed announced: left as it is", file_path)
                        return False
                    entry = self._entry_from(relative, data)
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("cannot read %s, left out of L0: %s", file_path, exc)
        elif expected_sha256 is not None:
            return False  # announced but gone: a delete is in flight, and its own change follows
        with self._write_lock:
            if self._current_entries().get(file_path) == entry:
                return False
            if entry is None:
                return self.remove(file_path)
            self.add(entry)
            return True

    def markdown_files(self) -> list[str]:
        """Relative POSIX paths of every `.md` file under the base, sorted (the index order).

        Only regular files count: a FIFO, socket or device named `x.md` would block or mislead a reader, and
        a link (file or folder) is followed only when it stays inside the base. What is skipped is logged
        once per path."""
        found: list[str] = []
        base_real = self._base.resolve()
        prefix = len(str(self._base)) + 1
        stack = [str(self._base)]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                log.warning("cannot list %s: %s", folder, exc)
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_symlink():
                        real = Path(entry.path).resolve()
                        if not real.is_relative_to(base_real):
                            self._warn_once(Path(entry.path), "a link leading outside the knowledge base")
                            continue
                        if real.is_dir():
                            continue  # its files are listed under their real folder
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.name.lower().endswith(".md"):
                        if entry.is_file():
                            found.append(entry.path[prefix:].replace(os.sep, "/"))
                        else:
                            self._warn_once(Path(entry.path), "not a regular file")
                except OSError as exc:
                    self._warn_once(Path(entry.path), f"unreadable ({exc})")
        return sorted(found)

    def _warn_once(self, path: Path, why: str) -> None:
        key = (str(path), why)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("skipping %s: %s", path, why)

    def is_inside(self, path: Path) -> bool:
        """True when `path` (a file or folder, links resolved) lies inside the base."""
        try:
            return path.resolve().is_relative_to(self._base.resolve())
        except (OSError, RuntimeError):
            return False

    @staticmethod
    def category_of(relative: str) -> str | None:
        """The first folder under the base (`api` for `api/x.md`); the storage layout is `{category}/{file}`."""
        parts = PurePosixPath(relative).parts
        return parts[0] if len(parts) > 1 else None

    # -- updates -------------------------------------------------------------------------------------
    @property
    def matching(self) -> str:
        return self._matching

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
            self._snapshot = Snapshot(tuple(entries.values()), self._matching, self._normalized)

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
        """Add an entry at the end, or replace the entry with the same `file_path` in place."""
        with self._write_lock:
            entries = self._current_entries()
            entries[entry.file_path] = entry  # a dict keeps the position of a replaced key
            self._publish(entries)

    def remove(self, file_path: str) -> bool:
        with self._write_lock:
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

    def get(self, file_path: str) -> KnowledgeEntry | None:
        snapshot = self._snapshot
        pos = snapshot.position.get(file_path)
        return None if pos is None else snapshot.entries[pos]

    @property
    def snapshot(self) -> Snapshot:
        """The current immutable snapshot (the keyword map is computed once per snapshot)."""
        return self._snapshot

    def claimants(self, keyword: str) -> list[str]:
        """Documents whose keywords equal `keyword` after normalisation."""
        snapshot = self._snapshot
        return [snapshot.entries[p].file_path for p in snapshot.claimed_by(keyword)]

    def entries(self) -> list[KnowledgeEntry]:
        return list(self._snapshot.entries)

    def __len__(self) -> int:
        return len(self._snapshot.entries)

    def __contains__(self, file_path: object) -> bool:
        return file_path in self._snapshot.position

    def read_document(self, file_path: str, max_chars: int = 2000, *, clean: bool = False) -> str | None:
        """The text, cut to `max_chars` characters plus "..." when longer (Spec 3.3). `clean=True` (answers)
        drops boilerplate first: HTML comments, `<head>` blocks, MDX import/export lines outside code.

        `None` when the file is missing (logged as ERROR) or the path resolves outside the base: agent code
        may pass anything, and `../../etc/passwd` must not be read.
        """
        real = self.resolve(file_path) if isinstance(file_path, (str, os.PathLike)) else None
        if real is None:
            log.warning("refusing to read %r: not inside the knowledge base %s", file_path, self._display_base)
            return None
        # An answer needs the first 2,000 characters, not a 5 MB file: read and clean a head first. Cleaning
        # runs front to back, so a cleaned head that is comfortably longer than the cut is exact.
        limit = max(2 * _HEAD_BYTES, 8 * max_chars) if max_chars >= 0 else -1
        try:
            with open(real, "rb") as handle:
                data = handle.read(limit)
                complete = limit < 0 or len(data) < limit
            text = data.decode("utf-8-sig", errors="replace")
            if clean:
                text = clean_document(text)
                if not complete and len(text) <= max_chars + 256:  # boilerplate ate the head: clean it all
                    text = clean_document(real.read_bytes().decode("utf-8-sig", errors="replace"))
            elif not complete and len(text) <= max_chars:  # pragma: no cover - 8 bytes per char cannot fall short
                text = real.read_bytes().decode("utf-8-sig", errors="replace")
        except FileNotFoundError:
            log.error("document %s does not exist", file_path)
            return None
        except OSError as exc:
            log.error("cannot read document %s: %s", file_path, exc)
            return None
        if max_chars >= 0 and len(text) > max_chars:
            return text[:max_chars] + "..."
        return text

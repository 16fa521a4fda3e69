"""L0: the in-memory keyword index over every document's frontmatter (Specs 3, 6, 9).

Matching is the spec's two-way test (decision I3) on normalised text: a document matches when the query
contains one of its keywords, or one of its keywords contains the query. Neither direction loops over the
keywords in Python:

- "query contains keyword": an Aho-Corasick automaton over all keywords, one pass over the query;
- "keyword contains query": `str.find` over all keywords joined by NUL, mapped back with `bisect`.

Readers never lock. Writers build a new immutable `_Snapshot` under a lock and swap one reference, so a
lookup sees the index either before or after an upload, never half-way (the spirit of decision I2's
CopyOnWriteArrayList). The automaton is built lazily, once per snapshot, so a bulk load costs one build.
"""

from __future__ import annotations

import bisect
import codecs
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import ahocorasick

from kb_core.documents.frontmatter import MAX_BLOCK_BYTES, Frontmatter, parse_frontmatter
from kb_core.settings import resolve_path
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

_SEPARATOR = "\x00"  # normalize_term() removes NUL, so it never occurs inside a keyword or a query


@dataclass(frozen=True)
class KnowledgeEntry:
    file_path: str
    title: str
    keywords: tuple[str, ...]
    summary: str
    category: str | None = None

    @classmethod
    def from_frontmatter(cls, file_path: str, fm: Frontmatter, category: str | None = None) -> KnowledgeEntry:
        return cls(
            file_path=file_path,
            title=fm.title,
            keywords=fm.keywords,
            summary=fm.summary,
            category=category or fm.category,
        )


@dataclass(frozen=True)
class L0Match:
    """One matched document and the keywords that matched it (the console highlights them)."""

    entry: KnowledgeEntry
    keywords: tuple[str, ...]
    # the keywords the query contains; the others contain the query (Spec 3.1's two directions)
    contained_in_query: tuple[str, ...] = ()

    def explain(self) -> list[str]:
        return [f"query contains “{k}”" if k in self.contained_in_query else f"“{k}” contains the query"
                for k in self.keywords]


@dataclass(frozen=True)
class KeywordClaim:
    """One keyword (as first spelled) and every document that claims it: more than one makes L0 ambiguous."""

    keyword: str
    file_paths: tuple[str, ...]

    @property
    def collides(self) -> bool:
        return len(self.file_paths) > 1


@dataclass(frozen=True)
class LoadReport:
    scanned: int
    indexed: int
    skipped: int
    failed: int
    seconds: float


_HEAD_BYTES = MAX_BLOCK_BYTES + 8 * 1024  # the frontmatter limit plus room for its delimiters


def _read_head(path: Path) -> str:
    """The start of a file, enough for any acceptable frontmatter block: L0 never needs the body, and the
    scan should not read megabytes of it at start-up."""
    with open(path, "rb") as handle:
        data = handle.read(_HEAD_BYTES)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    return decoder.decode(data, final=len(data) < _HEAD_BYTES)


class _Snapshot:
    """An immutable view of the index. Search structures are built on first use, once."""

    def __init__(self, entries: tuple[KnowledgeEntry, ...]):
        self.entries = entries
        self.position = {entry.file_path: i for i, entry in enumerate(entries)}
        self._built = False
        self._build_lock = threading.Lock()

    def _build(self) -> None:
        # keyword_owner[k] = (entry position, original keyword) for the k-th (entry, keyword) pair
        owners: list[tuple[int, str]] = []
        normalized: list[str] = []
        automaton = ahocorasick.Automaton()
        by_term: dict[str, list[int]] = {}
        for pos, entry in enumerate(self.entries):
            for keyword in entry.keywords:
                term = normalize_term(keyword)
                if not term:
                    continue
                by_term.setdefault(term, []).append(len(owners))
                owners.append((pos, keyword))
                normalized.append(term)
        for term, ids in by_term.items():
            automaton.add_word(term, tuple(ids))
        if by_term:
            automaton.make_automaton()
        self.automaton = automaton if by_term else None
        self.owners = owners
        self.joined = _SEPARATOR.join(normalized)
        offsets, at = [], 0
        for term in normalized:
            offsets.append(at)
            at += len(term) + 1
        self.offsets = offsets
        self.longest = max((len(t) for t in normalized), default=0)

    def ensure_built(self) -> None:
        if self._built:
            return
        with self._build_lock:
            if not self._built:
                self._build()
                self._built = True

    def match(self, query: str) -> list[L0Match]:
        term = normalize_term(query)
        if not term or not self.entries:
            return []
        self.ensure_built()
        hits: dict[int, list[str]] = {}
        inside: dict[int, list[str]] = {}

        def hit(owner_id: int, contained: bool = False) -> None:
            pos, keyword = self.owners[owner_id]
            found = hits.setdefault(pos, [])
            if keyword not in found:
                found.append(keyword)
            if contained and keyword not in inside.setdefault(pos, []):
                inside[pos].append(keyword)

        if self.automaton is not None:
            for _end, ids in self.automaton.iter(term):
                for owner_id in ids:
                    hit(owner_id, contained=True)
        if len(term) <= self.longest:
            joined, start = self.joined, 0
            while (at := joined.find(term, start)) != -1:
                hit(bisect.bisect_right(self.offsets, at) - 1)
                start = at + 1
        return [L0Match(self.entries[pos], tuple(hits[pos]), tuple(inside.get(pos, ()))) for pos in sorted(hits)]


class KnowledgeIndex:
    """The L0 index. `base_path` is kept as configured for display paths (`knowledge_base/api/x.md`) and
    resolved against `app_root` (default: the current directory) for disk access."""

    def __init__(self, base_path: str | os.PathLike[str], *, app_root: str | os.PathLike[str] | None = None):
        configured = PurePosixPath(Path(base_path).as_posix())
        root = Path(app_root) if app_root is not None else Path.cwd()
        self._display_base = configured
        self._app_root = root
        self._base = resolve_path(base_path, root)
        self._snapshot = _Snapshot(())
        self._write_lock = threading.Lock()

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
            display = self.display_path(relative)
            try:
                content = _read_head(self._base / relative)
            except (OSError, UnicodeDecodeError) as exc:
                failed += 1
                log.warning("cannot read %s, skipped: %s", display, exc)
                continue
            fm = parse_frontmatter(content, source=display)
            if fm is None:
                skipped += 1
                continue
            entries.append(KnowledgeEntry.from_frontmatter(display, fm, self.category_of(relative)))
        with self._write_lock:
            self._snapshot = _Snapshot(tuple(entries))
        self._snapshot.ensure_built()
        seconds = time.perf_counter() - started
        log.info(
            "L0 index loaded from %s: scanned=%d indexed=%d skipped=%d failed=%d in %.1f ms",
            self._display_base, scanned, len(entries), skipped, failed, seconds * 1000,
        )
        return LoadReport(scanned, len(entries), skipped, failed, seconds)

    def markdown_files(self) -> list[str]:
        """Relative POSIX paths of every `.md` file under the base, sorted (the index order)."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self._base, onerror=lambda e: log.warning("cannot list %s", e)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel_dir = Path(dirpath).relative_to(self._base)
            for name in filenames:
                if name.lower().endswith(".md") and not name.startswith("."):
                    found.append((rel_dir / name).as_posix())
        return sorted(found)

    @staticmethod
    def category_of(relative: str) -> str | None:
        """The first folder under the base (`api` for `api/x.md`); the storage layout is `{category}/{file}`."""
        parts = PurePosixPath(relative).parts
        return parts[0] if len(parts) > 1 else None

    # -- updates -------------------------------------------------------------------------------------
    def add(self, entry: KnowledgeEntry) -> None:
        """Add an entry at the end, or replace the entry with the same `file_path` in place."""
        with self._write_lock:
            current = self._snapshot
            entries = list(current.entries)
            pos = current.position.get(entry.file_path)
            if pos is None:
                entries.append(entry)
            else:
                entries[pos] = entry
            self._snapshot = _Snapshot(tuple(entries))

    def remove(self, file_path: str) -> bool:
        with self._write_lock:
            current = self._snapshot
            pos = current.position.get(file_path)
            if pos is None:
                return False
            entries = current.entries[:pos] + current.entries[pos + 1 :]
            self._snapshot = _Snapshot(entries)
            return True

    # -- queries -------------------------------------------------------------------------------------
    def exact_match(self, query: str) -> list[KnowledgeEntry]:
        """Every document whose keywords match the query, in index order, each once."""
        return [m.entry for m in self.match(query)]

    def match(self, query: str) -> list[L0Match]:
        """`exact_match` plus the keywords that matched each document."""
        if not isinstance(query, str):
            return []
        return self._snapshot.match(query)

    def get(self, file_path: str) -> KnowledgeEntry | None:
        snapshot = self._snapshot
        pos = snapshot.position.get(file_path)
        return None if pos is None else snapshot.entries[pos]

    def keyword_map(self) -> list[KeywordClaim]:
        """Every keyword with the documents claiming it (normalised), collisions first, then alphabetical."""
        claims: dict[str, tuple[str, list[str]]] = {}
        for entry in self._snapshot.entries:
            for keyword in entry.keywords:
                term = normalize_term(keyword)
                if not term:
                    continue
                spelled, paths = claims.setdefault(term, (keyword, []))
                if entry.file_path not in paths:
                    paths.append(entry.file_path)
        result = [KeywordClaim(spelled, tuple(paths)) for spelled, paths in claims.values()]
        return sorted(result, key=lambda c: (not c.collides, -len(c.file_paths), normalize_term(c.keyword)))

    def claimants(self, keyword: str) -> list[str]:
        """Documents whose keywords equal `keyword` after normalisation."""
        term = normalize_term(keyword)
        return [e.file_path for e in self._snapshot.entries if any(normalize_term(k) == term for k in e.keywords)]

    def entries(self) -> list[KnowledgeEntry]:
        return list(self._snapshot.entries)

    def __len__(self) -> int:
        return len(self._snapshot.entries)

    def __contains__(self, file_path: object) -> bool:
        return file_path in self._snapshot.position

    def read_document(self, file_path: str, max_chars: int = 2000) -> str | None:
        """The raw text, cut to `max_chars` characters plus "..." when longer (Spec 3.3).

        `None` when the file is missing (logged as ERROR) or the path resolves outside the base: agent code
        may pass anything, and `../../etc/passwd` must not be read.
        """
        real = self.resolve(file_path) if isinstance(file_path, (str, os.PathLike)) else None
        if real is None:
            log.warning("refusing to read %r: not inside the knowledge base %s", file_path, self._display_base)
            return None
        try:
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

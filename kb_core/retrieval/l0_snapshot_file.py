"""L0 opens from a saved snapshot: the entries of the last run, keyed by each file's size and modification
time, so an open parses only the files that changed since (issue 25).

The file (`KB_L0_SNAPSHOT`, default `kb_l0_snapshot.bin` in the application root) holds a header — a magic
line, the SHA-256 of the payload — and a pickled payload: the knowledge base's directory and the prefix of its
display paths, the entry schema (`KnowledgeEntry.FIELDS`) and, in columns (fast to unpickle), one record per
document file: its display path, its version (size, modification and change times, inode: 32 packed bytes) and
whether it is an L0 document (a file without valid frontmatter is not), and the entries' fields
(`entry.entry_columns`). Anything unexpected — another directory or
display prefix, another schema, a wrong digest, a truncated or foreign file — makes `load_with_index()` return
nothing and the caller scans in full; a snapshot can never give a wrong answer, only a slower open.

A record's stat is taken *before* its file was read: a file that changes while it is read keeps the old stat
in the record and is parsed again at the next open (never the other way round). Entries added without reading
their file here (a write of this process) have no record and are parsed again too.

The file is written by the application's own processes only (atomically: temp file + rename); it lies beside
the SQLite database and the Milvus Lite directory, which whoever can write there can change just as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb_core.documents.entry import KnowledgeEntry, entries_of_columns, entry_columns

log = logging.getLogger(__name__)

MAGIC = b"KB-L0-SNAPSHOT 3\n"
SCHEMA = KnowledgeEntry.FIELDS
STAT_SIZE = 32  # `folder.file_version`: size, mtime ns, ctime ns, inode

# a record: (the file's version, entry or None for a file that is not an L0 document)
Record = tuple[bytes, KnowledgeEntry | None]


@dataclass(frozen=True)
class Saved:
    """A loaded snapshot, in columns: `row` finds a display path's record."""

    paths: list[str]
    stats: bytes
    entries: list[KnowledgeEntry | None]
    row: dict[str, int]

    def stat(self, row: int) -> bytes:
        return self.stats[row * STAT_SIZE:(row + 1) * STAT_SIZE]

    def unchanged(self, row: int, version: bytes) -> bool:
        """Whether the file of `row` still has this version (compared in place: no copy per file)."""
        return self.stats.startswith(version, row * STAT_SIZE)

    def records(self) -> dict[str, Record]:
        return {path: (self.stat(i), self.entries[i]) for i, path in enumerate(self.paths)}


def load(path: Path, base_dir: Path, prefix: str | None = None) -> dict[str, Record] | None:
    """The records of a snapshot of `base_dir` by display path, or None when there is no usable one (missing,
    corrupt, of another directory, display prefix or entry schema)."""
    saved = load_with_index(path, base_dir, prefix)[0]
    return None if saved is None else saved.records()


def load_with_index(path: Path, base_dir: Path, prefix: str | None = None
                    ) -> tuple[Saved | None, Callable[[], Any] | None]:
    """The records and, when the file holds one, a loader of the built L0 snapshot saved with them (its search
    structures: building them is most of an open at 100,000 documents). The index is unpickled only when the
    loader is called - when every record was reused - and refers to the records' own entries; the caller still
    checks it is exactly what it would build (see `KnowledgeIndex.scan`). `prefix`: the display prefix the
    entries' paths must have been saved with (None: any)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        log.warning("cannot read the L0 snapshot %s, scanning in full: %s", path, exc)
        return None, None
    header = len(MAGIC) + 32
    if data.startswith(MAGIC[:15]) and not data.startswith(MAGIC):
        log.info("the L0 snapshot %s is of an older format, scanning in full (it is written again)", path)
        return None, None
    if not data.startswith(MAGIC) or len(data) < header:
        log.warning("the L0 snapshot %s is not one, scanning in full", path)
        return None, None
    payload = memoryview(data)[header:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):header]:
        log.warning("the L0 snapshot %s is damaged (digest mismatch), scanning in full", path)
        return None, None
    try:
        content: Any = pickle.loads(payload)
        if content["base"] != str(base_dir) or tuple(content["schema"]) != SCHEMA or (
                prefix is not None and content["prefix"] != prefix):
            log.info("the L0 snapshot %s is of another folder or version, scanning in full", path)
            return None, None
        paths, stats, present = content["paths"], content["stats"], content["present"]
        if not (isinstance(paths, list) and isinstance(stats, bytes) and isinstance(present, bytes)
                and len(paths) == len(present) and len(stats) == STAT_SIZE * len(paths)):
            return None, None
        found = iter(entries_of_columns(content["entries"]))
        entries = [next(found) if here else None for here in present]
        saved = Saved(paths, stats, entries, {p: i for i, p in enumerate(paths)})
        blob = content.get("index")
        return saved, (lambda: _load_index(blob, saved)) if isinstance(blob, bytes) else None
    except Exception as exc:  # noqa: BLE001 - a snapshot that does not unpickle is as good as none
        log.warning("the L0 snapshot %s cannot be read (%s), scanning in full", path, exc)
        return None, None


def save(path: Path, base_dir: Path, records: dict[str, Record], index: Any = None, prefix: str = "") -> None:
    """Write the snapshot atomically (temp file in the same directory, fsync, rename); `records` by display
    path; `index`, the built L0 snapshot of these records' entries, is saved with them as a pickle of its own
    that names each entry by its path (so an open that parses files again never pays for unpickling it)."""
    blob = _dump_index(index, records) if index is not None else None
    paths = list(records)
    entries = [records[p][1] for p in paths]
    payload = pickle.dumps({"base": str(base_dir), "prefix": prefix, "schema": SCHEMA, "paths": paths,
                            "stats": b"".join(records[p][0] for p in paths),
                            "present": bytes(entry is not None for entry in entries),
                            "entries": entry_columns([entry for entry in entries if entry is not None]),
                            "index": blob}, protocol=pickle.HIGHEST_PROTOCOL)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(MAGIC + hashlib.sha256(payload).digest())
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _dump_index(index: Any, records: dict[str, Record]) -> bytes:
    names = {id(record[1]): name for name, record in records.items() if record[1] is not None}

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> str | None:
            return names.get(id(obj)) if type(obj) is KnowledgeEntry else None

    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(index)
    return out.getvalue()


def _load_index(blob: bytes, saved: Saved) -> Any:
    row, entries = saved.row, saved.entries

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, name: str) -> KnowledgeEntry | None:
            return entries[row[name]]

    try:
        return _Unpickler(io.BytesIO(blob)).load()
    except Exception as exc:  # noqa: BLE001 - then the index is built from the entries, as without a snapshot
        log.warning("the L0 snapshot's saved index cannot be read (%s); building it", exc)
        return None

"""L0 opens from a saved snapshot: the entries of the last run, keyed by each file's size and modification
time, so an open parses only the files that changed since.

The file (`KB_L0_SNAPSHOT`, default `kb_l0_snapshot.bin` in the application root) lies where others may write
(a shared /tmp, a cloned repository, inside the document tree with `KB_BASE_PATH=.`), so it is data only and
keyed: reading it can build strings, numbers, lists and flat arrays, nothing that runs.

    magic line  "KB-L0-SNAPSHOT 5\\n"
    tag         HMAC-SHA-256 of the rest, keyed by this user's snapshot key (`snapshot_key.py`)
    length      8 bytes, little-endian: the manifest's length
    manifest    JSON: the knowledge base's directory, display prefix, entry schema and content version (the
                cleaning that made the entries' sections, `chunking.CONTENT_VERSION`), the byte order, the
                counts, the small parts of the saved index, and where each blob lies in the body
    body        the blobs: display paths (NUL-joined UTF-8), file versions (32 packed bytes each: size,
                modification and change times, inode), which files are L0 documents, the entries' matched
                fields (JSON columns) and their title/summary/section blobs (concatenated, with their ends),
                and the saved search structures as flat integer arrays (`index_data.py`)

Anything unexpected — another directory, display prefix or schema, a tag that does not verify (a forged file,
or one written under another key), a truncated or foreign file, a blob of the wrong length or range — makes
`load_with_index()` return nothing and the caller scans in full; a snapshot can never give a wrong answer or
run anything, only make an open slower. It is opened as a regular file only: a FIFO, device or link at its path
is skipped (logged) and replaced by a regular file at the next save.

A record's stat is taken *before* its file was read: a file that changes while it is read keeps the old stat
in the record and is parsed again at the next open (never the other way round). Entries added without reading
their file here (a write of this process) have no record and are parsed again too.

Writes are atomic (a temp file named with the writer's pid, fsync, rename); a temp file whose writer died (a
kill during a save) is removed at the next open.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import re
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb_core.documents.chunking import CONTENT_VERSION
from kb_core.documents.folder import read_regular
from kb_core.errors import KnowledgeBaseError
from kb_core.keywords import index_data
from kb_core.keywords.entry import KnowledgeEntry, entries_of_columns, entry_columns
from kb_core.keywords.snapshot_key import snapshot_key

log = logging.getLogger(__name__)

MAGIC = b"KB-L0-SNAPSHOT 5\n"
SCHEMA = KnowledgeEntry.FIELDS
STAT_SIZE = 32  # `folder.file_version`: size, mtime ns, ctime ns, inode
_TAG = 32
_LENGTH = struct.Struct("<Q")
_HEAD = len(MAGIC) + _TAG + _LENGTH.size
_MAX_MANIFEST = 64 * 1024 * 1024
STALE_TEMP_AFTER = 3600.0  # seconds: a temp file this old is no save in flight, whoever wrote it

# a record: (the file's version, entry or None for a file that is not an L0 document)
Record = tuple[bytes, KnowledgeEntry | None]


class SnapshotInvalid(KnowledgeBaseError, ValueError):
    """The file is not a usable snapshot (the open scans in full). Caught where the snapshot is read; a
    `ValueError` too, as the parsers' own errors are."""


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
    corrupt, forged, of another directory, display prefix or entry schema)."""
    saved = load_with_index(path, base_dir, prefix)[0]
    return None if saved is None else saved.records()


def load_with_index(path: Path, base_dir: Path, prefix: str | None = None
                    ) -> tuple[Saved | None, Callable[[], Any] | None]:
    """The records and, when the file holds one, a loader of the built L0 snapshot saved with them (its search
    structures: building them is most of an open at 100,000 documents). The index is decoded only when the
    loader is called - when every record was reused - and refers to the records' own entries; the caller still
    checks it is exactly what it would build (see `KnowledgeIndex.scan`). `prefix`: the display prefix the
    entries' paths must have been saved with (None: any)."""
    remove_stale_temp_files(path)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:  # a FIFO, device, link or folder at the path: never waited on, replaced at the next save
        log.warning("cannot read the L0 snapshot %s, scanning in full: %s", path, exc)
        return None, None
    try:
        manifest, body = _verified(path, data)
        if manifest.get("base") != str(base_dir) or manifest.get("schema") != list(SCHEMA) or \
                manifest.get("content") != CONTENT_VERSION or (
                prefix is not None and manifest.get("prefix") != prefix):
            log.info("the L0 snapshot %s is of another folder or version, scanning in full", path)
            return None, None
        saved = _records(manifest, body)
    except (SnapshotInvalid, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        log.warning("the L0 snapshot %s is not usable (%s), scanning in full", path, exc)
        return None, None
    index = manifest.get("index")
    if not isinstance(index, dict):
        return saved, None
    return saved, lambda: _load_index(index, body, saved)


def _verified(path: Path, data: bytes) -> tuple[dict[str, Any], memoryview]:
    """The manifest and the body of a file whose tag verifies under this user's key."""
    if data.startswith(MAGIC[:15]) and not data.startswith(MAGIC):
        raise SnapshotInvalid("an older format (it is written again)")
    if not data.startswith(MAGIC) or len(data) < _HEAD:
        raise SnapshotInvalid("not an L0 snapshot")
    view = memoryview(data)
    tag = bytes(view[len(MAGIC):len(MAGIC) + _TAG])
    if not hmac.compare_digest(tag, hmac.digest(snapshot_key(), view[len(MAGIC) + _TAG:], "sha256")):
        raise SnapshotInvalid("its tag does not verify: damaged, forged, or written under another user's key")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC) + _TAG)
    if length > min(_MAX_MANIFEST, len(data) - _HEAD):
        raise SnapshotInvalid("truncated manifest")
    manifest = json.loads(bytes(view[_HEAD:_HEAD + length]))
    if not isinstance(manifest, dict) or manifest.get("byteorder") != sys.byteorder:
        raise SnapshotInvalid("a manifest of another layout or machine")
    return manifest, view[_HEAD + length:]


def blob(manifest: dict[str, Any], body: memoryview, name: str) -> memoryview:
    """A named blob of the body, checked to lie inside it."""
    where = manifest["blobs"][name]
    if not (isinstance(where, list) and len(where) == 2 and all(type(n) is int and n >= 0 for n in where)
            and where[0] + where[1] <= len(body)):
        raise SnapshotInvalid(f"blob {name} lies outside the file")
    return body[where[0]:where[0] + where[1]]


def _records(manifest: dict[str, Any], body: memoryview) -> Saved:
    count = manifest["count"]
    if type(count) is not int or count < 0:
        raise SnapshotInvalid("no record count")
    text = bytes(blob(manifest, body, "paths")).decode("utf-8")
    paths = text.split("\x00") if count else []
    stats = bytes(blob(manifest, body, "stats"))
    present = bytes(blob(manifest, body, "present"))
    if len(paths) != count or len(stats) != STAT_SIZE * count or len(present) != count \
            or present.strip(b"\x00\x01") or len(set(paths)) != count:
        raise SnapshotInvalid("records of inconsistent lengths")
    own_paths = [path for path, here in zip(paths, present, strict=True) if here]
    columns = {name: blob(manifest, body, f"entry.{name}") for name in manifest["entry_columns"]}
    found = iter(entries_of_columns(own_paths, columns, manifest["entry_extra"]))
    entries = [next(found) if here else None for here in present]
    return Saved(paths, stats, entries, {p: i for i, p in enumerate(paths)})


def _load_index(index: dict[str, Any], body: memoryview, saved: Saved) -> Any:
    try:
        return index_data.snapshot_of_data(index, lambda name: blob(index, body, name),
                                              tuple(e for e in saved.entries if e is not None))
    except (SnapshotInvalid, ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        log.warning("the L0 snapshot's saved index is not usable (%s); building it", exc)
        return None


def save(path: Path, base_dir: Path, records: dict[str, Record], index: Any = None, prefix: str = "") -> None:
    """Write the snapshot atomically (temp file in the same directory, fsync, rename); `records` by display
    path; `index`, the built L0 snapshot of these records' entries (in their order), is saved with them."""
    paths = list(records)
    entries = [records[p][1] for p in paths]
    own = [entry for entry in entries if entry is not None]
    parts: list[bytes] = []
    offset = 0

    def add(blobs: dict[str, list[int]], name: str, data: bytes) -> None:
        nonlocal offset
        blobs[name] = [offset, len(data)]
        parts.append(data)
        offset += len(data)

    blobs: dict[str, list[int]] = {}
    add(blobs, "paths", "\x00".join(paths).encode("utf-8"))
    add(blobs, "stats", b"".join(records[p][0] for p in paths))
    add(blobs, "present", bytes(entry is not None for entry in entries))
    columns, extra = entry_columns(own)
    for name, data in columns.items():
        add(blobs, f"entry.{name}", data)
    manifest: dict[str, Any] = {"base": str(base_dir), "prefix": prefix, "schema": list(SCHEMA),
                                "content": CONTENT_VERSION,
                                "byteorder": sys.byteorder, "count": len(paths), "blobs": blobs,
                                "entry_columns": list(columns), "entry_extra": extra}
    if index is not None:
        small, arrays = index_data.data_of_snapshot(index, own)
        index_blobs: dict[str, list[int]] = {}
        for name, data in arrays.items():
            add(index_blobs, name, data)
        manifest["index"] = {**small, "blobs": index_blobs}
    head = json.dumps(manifest, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    signed = [_LENGTH.pack(len(head)), head, *parts]
    tag = hmac.new(snapshot_key(), digestmod="sha256")
    for part in signed:
        tag.update(part)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid in the name: a temp file of a save that was killed is removed by the next open
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(MAGIC + tag.digest())
            for part in signed:
                out.write(part)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)  # over a FIFO, device or link at the path too: the name gets a regular file
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale_temp_files(path: Path) -> list[Path]:
    """The temp files of saves whose writer is gone (a kill -9 during a save), or older than an hour: removed."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)\.[^.]+\.tmp$")
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None:
            continue
        try:
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
            pid = int(match.group(1))
            if (pid != os.getpid() and not _alive(pid)) or age > STALE_TEMP_AFTER:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    if removed:
        log.info("removed %d temp file(s) of interrupted L0 snapshot saves beside %s", len(removed), path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True

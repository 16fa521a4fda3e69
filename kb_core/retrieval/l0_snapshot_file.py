"""L0 opens from a saved snapshot: the entries of the last run, keyed by each file's size and modification
time, so an open parses only the files that changed since (issue 25).

The file (`KB_L0_SNAPSHOT`, default `kb_l0_snapshot.bin` in the application root) holds a header — a magic
line, the SHA-256 of the payload — and a pickled payload: the knowledge base's directory, the entry schema (the
`KnowledgeEntry` field names) and one record per document file: its size, modification and change times and
inode, and its entry (None: a file without valid frontmatter, not in L0). Anything unexpected — another
directory, another schema, a wrong digest, a truncated or foreign file — makes `load()` return None and the
caller scans in full; a snapshot can never give a wrong answer, only a slower open.

A record's size and time are taken *before* its file was read: a file that changes while it is read keeps
the old time in the record and is parsed again at the next open (never the other way round). Entries added
without reading their file here (a write of this process) have no record and are parsed again too.

The file is written by the application's own processes only (atomically: temp file + rename); it lies beside
the SQLite database and the Milvus Lite directory, which whoever can write there can change just as well.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb_core.documents.entry import KnowledgeEntry

log = logging.getLogger(__name__)

MAGIC = b"KB-L0-SNAPSHOT 2\n"
SCHEMA = tuple(f.name for f in dataclasses.fields(KnowledgeEntry))

# size, mtime_ns, ctime_ns, inode, entry (None: a file that is not an L0 document)
Record = tuple[int, int, int, int, KnowledgeEntry | None]


def load(path: Path, base_dir: Path) -> dict[str, Record] | None:
    """The records of a snapshot of `base_dir`, or None when there is no usable one (missing, corrupt, of
    another directory or entry schema)."""
    return load_with_index(path, base_dir)[0]


def load_with_index(path: Path, base_dir: Path) -> tuple[dict[str, Record] | None, Callable[[], Any] | None]:
    """The records and, when the file holds one, a loader of the built L0 snapshot saved with them (its search
    structures: building them is most of an open at 100,000 documents). The index is unpickled only when the
    loader is called - when every record was reused - and refers to the records' own entries; the caller still
    checks it is exactly what it would build (see `KnowledgeIndex.scan`)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        log.warning("cannot read the L0 snapshot %s, scanning in full: %s", path, exc)
        return None, None
    header = len(MAGIC) + 32
    if not data.startswith(MAGIC) or len(data) < header:
        log.warning("the L0 snapshot %s is not one, scanning in full", path)
        return None, None
    payload = memoryview(data)[header:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):header]:
        log.warning("the L0 snapshot %s is damaged (digest mismatch), scanning in full", path)
        return None, None
    try:
        content: Any = pickle.loads(payload)
        if content["base"] != str(base_dir) or tuple(content["schema"]) != SCHEMA:
            log.info("the L0 snapshot %s is of another folder or version, scanning in full", path)
            return None, None
        records = content["records"]
        if not isinstance(records, dict):
            return None, None
        blob = content.get("index")
        return records, (lambda: _load_index(blob, records)) if isinstance(blob, bytes) else None
    except Exception as exc:  # noqa: BLE001 - a snapshot that does not unpickle is as good as none
        log.warning("the L0 snapshot %s cannot be read (%s), scanning in full", path, exc)
        return None, None


def save(path: Path, base_dir: Path, records: dict[str, Record], index: Any = None) -> None:
    """Write the snapshot atomically (temp file in the same directory, fsync, rename); `index`, the built L0
    snapshot of these records' entries, is saved with them as a pickle of its own that names each entry by its
    record (so an open that parses files again never pays for unpickling it)."""
    blob = _dump_index(index, records) if index is not None else None
    payload = pickle.dumps({"base": str(base_dir), "schema": SCHEMA, "records": records, "index": blob},
                           protocol=pickle.HIGHEST_PROTOCOL)
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
    names = {id(record[4]): relative for relative, record in records.items() if record[4] is not None}

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> str | None:
            return names.get(id(obj)) if type(obj) is KnowledgeEntry else None

    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(index)
    return out.getvalue()


def _load_index(blob: bytes, records: dict[str, Record]) -> Any:
    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, name: str) -> KnowledgeEntry | None:
            return records[name][4]

    try:
        return _Unpickler(io.BytesIO(blob)).load()
    except Exception as exc:  # noqa: BLE001 - then the index is built from the entries, as without a snapshot
        log.warning("the L0 snapshot's saved index cannot be read (%s); building it", exc)
        return None

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
import logging
import os
import pickle
import tempfile
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


def load_with_index(path: Path, base_dir: Path) -> tuple[dict[str, Record] | None, Any]:
    """The records and, when the file holds one, the built L0 snapshot saved with them (its search structures:
    building them is half of an open at 100,000 documents). The caller uses the built one only when every record
    was reused and its entries are the records' own, in order (see `KnowledgeIndex.scan`)."""
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
        return records, content.get("index")
    except Exception as exc:  # noqa: BLE001 - a snapshot that does not unpickle is as good as none
        log.warning("the L0 snapshot %s cannot be read (%s), scanning in full", path, exc)
        return None, None


def save(path: Path, base_dir: Path, records: dict[str, Record], index: Any = None) -> None:
    """Write the snapshot atomically (temp file in the same directory, fsync, rename); `index`, the built L0
    snapshot of exactly these records' entries, is saved with them (pickled once: the entries are shared)."""
    payload = pickle.dumps({"base": str(base_dir), "schema": SCHEMA, "records": records, "index": index},
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

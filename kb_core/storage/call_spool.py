"""The call log's spool: calls answered by a process that never opened the database (`kb lookup` answering
from L0 alone) wait here, one JSON line each, until a process with the database moves them into the
`tool_call` table (at its opening, then every few seconds while it runs).

Appends and the move take an exclusive `flock` on the spool, so a line is never half-read or taken twice. The
move renames the spool aside first and deletes that file only after the rows are committed: a mover killed in
between leaves the file, and the next mover inserts only the calls whose request ids the log does not hold yet
(nothing lost, nothing counted twice)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SPOOL_NAME = "kb_call_spool.jsonl"
_ASIDE = ".moving"


def spool_at(app_root: Path) -> CallSpool:
    """The application root's call spool (every process of the knowledge base uses this one)."""
    return CallSpool(Path(app_root) / SPOOL_NAME)


class CallSpool:
    """Append-only call records beside the database's other files (the application root)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    # -- the writer's side (a process without the database) --------------------------------------------
    def record_tool_calls(self, records: Sequence[Mapping[str, Any]], *, dropped: int = 0, reason: str = "") -> int:
        """Append `records` (the fields `CallRecorder.record` takes); the same signature as the metadata
        store's, so a `CallRecorder` can write here."""
        lines = "".join(json.dumps(_plain(r), ensure_ascii=False) + "\n" for r in records)
        if not lines:
            return 0
        with self._locked():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        return len(records)

    def record_tool_call(self, **fields: Any) -> int:
        return self.record_tool_calls([fields])

    # -- the mover's side (a process with the database) ------------------------------------------------
    def move(self, insert: Callable[[list[dict[str, Any]]], object],
             known_ids: Callable[[list[str]], set[str]]) -> int:
        """Move every spooled call into the log with `insert(records)` (one transaction); a file left by a mover
        that died is filtered through `known_ids(request_ids)` first. Returns the calls moved. Cheap when there
        is nothing: one stat."""
        aside = self.path.with_name(self.path.name + _ASIDE)
        if not self.path.exists() and not aside.exists():
            return 0
        with self._locked():
            leftover = aside.exists()
            if not leftover:
                try:
                    os.replace(self.path, aside)
                except FileNotFoundError:
                    return 0
            records = _read(aside)
            if leftover and records:
                held = known_ids([r["request_id"] for r in records if r.get("request_id")])
                records = [r for r in records if r.get("request_id") not in held]
            if records:
                insert(records)
            aside.unlink()  # calls spooled meanwhile are in a new spool: the next move takes them
        if records:
            log.info("moved %d spooled tool calls into the call log", len(records))
        return len(records)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _plain(record: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(record)
    created = out.get("created_at")
    if isinstance(created, datetime):
        out["created_at"] = created.isoformat()
    for key in ("match_types", "sources"):
        if key in out and out[key] is not None:
            out[key] = list(out[key])
    return out


def _read(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if isinstance(record.get("created_at"), str):
                record["created_at"] = datetime.fromisoformat(record["created_at"])
            record["match_types"] = tuple(record.get("match_types") or ())
            record["sources"] = tuple(record.get("sources") or ())
        except (ValueError, AttributeError, TypeError) as exc:  # a torn line (disk full): the rest still count
            log.warning("skipped line %d of the call spool %s: %s", number, path, exc)
            continue
        if isinstance(record, dict) and record.get("tool_name"):
            records.append(record)
    return records

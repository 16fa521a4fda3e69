"""The trash: deleted documents kept as files outside the scanned folder for `KB_TRASH_DAYS` days.

One item per deletion, a folder named by when it was deleted plus a random tag, so the same path deleted twice
is two items:

    kb_trash/20250301T101500123456Z-1a2b3c4d/apisix/docs/en/latest/plugins/limit-req.md   the file, unchanged
    kb_trash/20250301T101500123456Z-1a2b3c4d/.trashinfo.json                             its record

The record (a sidecar) says where the file was, when it was deleted and by whom, its sha256 and its size. The
layout alone says where the file was (its path inside the item) and when (the folder's name), so an item whose
record is missing or unreadable is still listed with what is known, and can be restored or purged.

Crash safety, with `DocumentService.delete` (which records its intent in the database first): the item's folder
and a first record are written (`prepare`), then the file is moved in by one rename (`move_in`, the same file
system; a copy, fsync and rename, then the unlink, across file systems), then the record is completed with the
file's sha256. A kill at any moment leaves the file in the knowledge base (recovery of the delete moves it) or
in the trash, never nowhere. An item folder without a file (a kill between the two steps, or a delete that
failed after `prepare`) is never listed; the purge removes it once it is an hour old.

The trash is not under the knowledge base (`Settings.trash_dir`): the scan, reconcile and the folder watcher
never see a trashed file. Restoring goes through the normal upload (`DocumentService.restore`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from kb_core.documents.folder import KnowledgeFolder, read_regular, write_atomic
from kb_core.errors import DocumentError, InvalidInputError
from kb_core.progress import Progress, no_progress

log = logging.getLogger(__name__)

__all__ = ["RECORD_NAME", "Trash", "TrashItem", "TrashSlot"]

RECORD_NAME = ".trashinfo.json"  # hidden: never a document's name, never a category folder's
_ITEM_ID = re.compile(r"^(\d{8}T\d{12})Z-[0-9a-f]{8}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PURGING = ".purging-"  # an item being removed: renamed first, so it vanishes from the list at once
DANGLING_AFTER = timedelta(hours=1)  # an item folder without a file this old is no delete in flight


@dataclass(frozen=True)
class TrashItem:
    """A document in the trash: where it was (`relative_path` under the knowledge base, `file_path` as the
    document's path read), when and by whom it was deleted, its size and sha256 (None when its record is
    missing or incomplete), and `problem`: what is not known and why (None for a complete record)."""

    item_id: str
    relative_path: str
    file_path: str
    deleted_at: datetime
    deleted_by: str | None
    size_bytes: int
    sha256: str | None = None
    problem: str | None = None

    @property
    def category(self) -> str:
        return self.relative_path.rpartition("/")[0]

    @property
    def file_name(self) -> str:
        return self.relative_path.rpartition("/")[2]


@dataclass(frozen=True)
class TrashSlot:
    """An item prepared for a file (`Trash.prepare`): its folder and first record exist, the file is not there."""

    item_id: str
    folder: Path
    relative_path: str
    record: dict = field(compare=False)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _safe_relative(value: object) -> str | None:
    """A relative POSIX path of at least one part with no `..`, no empty or hidden parts; else None."""
    if not isinstance(value, str) or not value or "\\" in value or "\x00" in value:
        return None
    path = PurePosixPath(value)
    if path.is_absolute() or any(part in ("", ".", "..") or part.startswith(".") for part in path.parts):
        return None
    return path.as_posix()


def purge_age_days(older_than_days: object, default: float) -> float:
    """The one check of a purge's `older_than_days`: the days given (None: `default`, `KB_TRASH_DAYS`), a
    number from 0, or `InvalidInputError`."""
    if older_than_days is None:
        return default
    if isinstance(older_than_days, bool) or not isinstance(older_than_days, (int, float)) \
            or not 0 <= older_than_days < 100_000:
        raise InvalidInputError(f"older_than_days must be a number of days from 0, not {older_than_days!r}")
    return older_than_days


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class Trash:
    """The trash folder (`Settings.trash_dir`). `folder` is the knowledge base: it names a trashed file's
    original path (`file_path`) and caps what a restore reads (`KB_MAX_UPLOAD_BYTES`)."""

    def __init__(self, directory: str | os.PathLike[str], folder: KnowledgeFolder):
        self._dir = Path(directory)
        self._folder = folder

    @property
    def directory(self) -> Path:
        return self._dir

    # -- putting a file in -----------------------------------------------------------------------------
    def prepare(self, relative_path: str, *, deleted_by: str | None, deleted_at: datetime | None = None,
                document_id: int | None = None) -> TrashSlot:
        """Make the item's folder and its first record (no sha256 yet). `OSError` when the trash cannot be
        written: nothing was deleted then."""
        relative = _safe_relative(relative_path)
        if relative is None:
            raise OSError(errno.EINVAL, f"{relative_path!r} is no path under the knowledge base")
        moment = _aware(deleted_at) if deleted_at is not None else datetime.now(UTC)
        item_id = f"{moment.astimezone(UTC):%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"
        folder = self._dir / item_id
        (folder / relative).parent.mkdir(parents=True, exist_ok=False)
        record = {"version": 1, "path": self._folder.display_path(relative), "relative_path": relative,
                  "deleted_at": moment.astimezone(UTC).isoformat(), "deleted_by": deleted_by,
                  "document_id": document_id, "sha256": None, "size_bytes": None}
        try:
            self._write_record(folder, record)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return TrashSlot(item_id, folder, relative, record)

    def move_in(self, slot: TrashSlot, source: Path) -> TrashItem:
        """Move the file at `source` (a regular file in the knowledge base) into the prepared item: one rename,
        or across file systems a copy (fsync, rename) before the original is unlinked. Then the record gets the
        file's sha256 and size; a failure there is logged, the file is safe either way. `OSError` when the file
        could not be moved (it is where it was)."""
        target = slot.folder / slot.relative_path
        try:
            os.rename(source, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            write_atomic(target, read_regular(source))  # another file system: copy first, then let go
            os.unlink(source)
        try:
            data = read_regular(target)
            record = {**slot.record, "sha256": _sha256(data), "size_bytes": len(data)}
            self._write_record(slot.folder, record)
        except OSError as exc:
            log.warning("the trash record of %s was not completed (%s): it is listed without its sha256",
                        slot.relative_path, exc)
        item = self._item(slot.folder, slot.item_id)
        if item is None:  # pragma: no cover - the file was moved in just above
            raise OSError(errno.ENOENT, f"{target} vanished from the trash")
        log.info("moved %s to the trash (%s)", item.file_path, slot.item_id)
        return item

    def keep_copy(self, relative_path: str, data: bytes, *, deleted_by: str | None,
                  document_id: int | None = None, reason: str | None = None) -> TrashItem:
        """A new item holding a copy of `data` (the version a restore is about to replace): written in full
        (fsync, rename) and its record completed before this returns, so the caller may overwrite the original.
        `OSError` when the trash cannot be written (nothing is kept then, and nothing should be replaced)."""
        slot = self.prepare(relative_path, deleted_by=deleted_by, document_id=document_id)
        try:
            write_atomic(slot.folder / slot.relative_path, data)
            record = {**slot.record, "sha256": _sha256(data), "size_bytes": len(data)}
            if reason:
                record["reason"] = reason
            self._write_record(slot.folder, record)
        except BaseException:
            shutil.rmtree(slot.folder, ignore_errors=True)
            raise
        item = self._item(slot.folder, slot.item_id)
        if item is None:  # pragma: no cover - written just above
            raise OSError(errno.ENOENT, f"{slot.folder} vanished from the trash")
        log.info("kept the replaced version of %s in the trash (%s)", item.file_path, slot.item_id)
        return item

    def abandon(self, slot: TrashSlot) -> None:
        """Remove a prepared item whose file was not moved in (the delete stopped before)."""
        if not (slot.folder / slot.relative_path).exists():
            shutil.rmtree(slot.folder, ignore_errors=True)

    @staticmethod
    def _write_record(folder: Path, record: dict) -> None:
        write_atomic(folder / RECORD_NAME, json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"))

    # -- reading ---------------------------------------------------------------------------------------
    def items(self) -> list[TrashItem]:
        """Every item with its file, newest first. Reads each item's record and stats its file; no file content."""
        found = [item for _folder, item in self._scan() if item is not None]
        return sorted(found, key=lambda i: (i.deleted_at, i.item_id), reverse=True)

    def get(self, item_id: str) -> TrashItem | None:
        """The item of that id, or None. The id is looked up among the trash's item folders, never resolved as a
        path: `"."`, `".."`, `""`, separators, an id too long for a file name or of a purged item are no item."""
        folder = self._folder_of(item_id)
        return None if folder is None else self._item(folder, item_id)

    def _folder_of(self, item_id: object) -> Path | None:
        """The folder of an existing item named exactly `item_id` (a listed, not hidden, real directory)."""
        if not isinstance(item_id, str) or not item_id or item_id.startswith(".") or len(item_id) > 255:
            return None
        try:
            with os.scandir(self._dir) as entries:
                for entry in entries:
                    if entry.name == item_id:
                        return Path(entry.path) if entry.is_dir(follow_symlinks=False) else None
        except OSError:  # no trash yet, or unreadable: no item
            return None
        return None

    def find(self, path: str) -> TrashItem | None:
        """The newest item of a document path: as a document's path reads (`knowledge_base/api/x.md`) or
        relative to the knowledge base (`api/x.md`)."""
        if not isinstance(path, str):
            return None
        relative = self._folder.relative_of(path) or path.strip().lstrip("/")
        return next((item for item in self.items() if item.relative_path == relative), None)

    def current(self, item: TrashItem | str) -> TrashItem:
        """The item as it is in the trash now, from an item, its id or a document path (its newest item);
        `InvalidInputError` when there is none."""
        key = item.item_id if isinstance(item, TrashItem) else item
        if not isinstance(key, str):
            raise InvalidInputError(f"expected a trash item, its id or a document path, not {item!r}")
        found = self.find(key) if "/" in key else self.get(key)
        if found is None:
            shown = key if len(key) <= 120 else f"{key[:60]}…({len(key)} characters)"
            raise InvalidInputError(f"{shown!r} is not in the trash: no item has that id or document path "
                                    "(restored or purged already?); nothing was done")
        return found

    def read(self, item: TrashItem) -> bytes:
        """The trashed file's bytes (at most `KB_MAX_UPLOAD_BYTES`, never through a link). `DocumentError` when
        it is gone, unreadable, or no longer the file that was deleted (its sha256 differs from the record)."""
        folder, relative = self._folder_of(item.item_id), _safe_relative(item.relative_path)
        try:
            if folder is None or relative is None:
                raise FileNotFoundError(errno.ENOENT, f"no trash item {item.item_id!r}")
            data = read_regular(folder / relative, max_bytes=self._folder.max_bytes)
        except FileNotFoundError as exc:
            raise DocumentError("read from the trash", f"{item.file_path} is no longer in the trash (restored or "
                                                      "purged meanwhile?); nothing was restored") from exc
        except OSError as exc:
            raise DocumentError("read from the trash", f"{exc}; nothing was restored") from exc
        if item.sha256 is not None and _sha256(data) != item.sha256:
            raise DocumentError("read from the trash", f"{item.file_path} in the trash ({item.item_id}) is not the "
                                f"file that was deleted: its sha256 is {_sha256(data)[:12]}, the record says "
                                f"{item.sha256[:12]}; nothing was restored")
        return data

    def _scan(self) -> list[tuple[Path, TrashItem | None]]:
        """(folder, item or None for a folder without a file) of every item folder."""
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot list the trash %s: %s", self._dir, exc)
            return []
        found = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                found.append((Path(entry.path), self._item(Path(entry.path), entry.name)))
            except OSError as exc:
                log.warning("cannot read the trash item %s: %s", entry.path, exc)
        return found

    def _item(self, folder: Path, item_id: str) -> TrashItem | None:
        record, problem = self._read_record(folder)
        named = _safe_relative(record.get("relative_path"))
        relative = named if named is not None and self._is_file(folder / named) else self._find_file(folder)
        if relative is None:
            return None
        if named is not None and relative != named:
            problem = problem or f"the record names {named}, but the file in the trash is {relative}"
        size = os.lstat(folder / relative).st_size
        deleted_at = self._deleted_at(record, item_id, folder)
        by = record.get("deleted_by")
        sha = record.get("sha256")
        sha = sha if isinstance(sha, str) and _SHA256.match(sha) and relative == named else None
        if sha is None and problem is None:
            problem = "the record has no sha256 (the delete stopped before completing it)"
        return TrashItem(item_id=item_id, relative_path=relative, file_path=self._folder.display_path(relative),
                         deleted_at=deleted_at, deleted_by=by if isinstance(by, str) and by else None,
                         size_bytes=size, sha256=sha, problem=problem)

    @staticmethod
    def _read_record(folder: Path) -> tuple[dict, str | None]:
        try:
            data = read_regular(folder / RECORD_NAME, max_bytes=64 * 1024)
        except FileNotFoundError:
            return {}, "no record: where it was and when come from the trash folder, who deleted it is unknown"
        except OSError as exc:
            return {}, f"the record is unreadable ({exc})"
        try:
            record = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            return {}, f"the record is unreadable ({exc.__class__.__name__}): who deleted it is unknown"
        if not isinstance(record, dict):
            return {}, "the record is unreadable (not a JSON object): who deleted it is unknown"
        return record, None

    @staticmethod
    def _is_file(path: Path) -> bool:
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            return False

    def _find_file(self, folder: Path) -> str | None:
        """The first regular, not hidden file under an item folder (links not followed), as a relative path."""
        for current, folders, files in os.walk(folder):
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and self._is_file(Path(current) / name):
                    return (Path(current) / name).relative_to(folder).as_posix()
        return None

    @staticmethod
    def _deleted_at(record: dict, item_id: str, folder: Path) -> datetime:
        value = record.get("deleted_at")
        if isinstance(value, str):
            try:
                return _aware(datetime.fromisoformat(value))
            except ValueError:
                pass
        match = _ITEM_ID.match(item_id)
        if match is not None:
            try:
                return datetime.strptime(match.group(1), "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)
            except ValueError:
                pass
        return datetime.fromtimestamp(folder.lstat().st_mtime, UTC)

    # -- taking items out ------------------------------------------------------------------------------
    def remove(self, item: TrashItem) -> bool:
        """Remove an item (after a restore, or to purge it); False when it was gone already (or is no item)."""
        folder = self._folder_of(item.item_id)
        return folder is not None and self._remove_folder(folder)

    def _remove_folder(self, folder: Path) -> bool:
        doomed = folder.with_name(f"{_PURGING}{folder.name}-{secrets.token_hex(4)}")
        try:
            os.rename(folder, doomed)  # gone from the list at once; a kill during the removal leaves a hidden rest
        except FileNotFoundError:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def purge(self, older_than: timedelta | None = None, *, items: Iterable[TrashItem] | None = None,
              now: datetime | None = None, progress: Progress = no_progress) -> list[TrashItem]:
        """Remove `items`, or every item deleted at least `older_than` ago (and the rests of interrupted deletes
        and purges). The items removed; `progress("purging", removed, due)` after each."""
        now = now or datetime.now(UTC)
        if items is not None:
            chosen = list(items)
            removed = []
            for item in chosen:
                if self.remove(item):
                    removed.append(item)
                progress("purging", len(removed), len(chosen))
            return removed
        if older_than is None:
            raise ValueError("purge needs items or an age")
        due = []
        for folder, item in self._scan():
            if item is None:
                try:
                    stale = now - datetime.fromtimestamp(folder.stat().st_mtime, UTC) >= DANGLING_AFTER
                except OSError:  # removed meanwhile (another process's purge)
                    continue
                if stale:
                    log.info("removing the trash folder %s: it holds no file (an interrupted delete)", folder.name)
                    self._remove_folder(folder)
            elif now - item.deleted_at >= older_than:
                due.append(item)
        removed = []
        progress("purging", 0, len(due))
        for item in due:
            if self.remove(item):
                removed.append(item)
            progress("purging", len(removed), len(due))
        self._remove_rests()
        if removed:
            log.info("purged %d documents from the trash (deleted %s or longer ago)", len(removed), older_than)
        return removed

    def due(self, older_than: timedelta, *, now: datetime | None = None) -> bool:
        """Whether `purge(older_than)` would remove anything: an item deleted that long ago, an interrupted
        delete's folder an hour old, or the rest of a killed purge. Reads what `items()` reads."""
        now = now or datetime.now(UTC)
        for folder, item in self._scan():
            if item is not None and now - item.deleted_at >= older_than:
                return True
            if item is None:
                try:
                    if now - datetime.fromtimestamp(folder.stat().st_mtime, UTC) >= DANGLING_AFTER:
                        return True
                except OSError:
                    continue
        try:
            return any(entry.name.startswith(_PURGING) for entry in os.scandir(self._dir))
        except OSError:
            return False

    def _remove_rests(self) -> None:
        """Folders a killed purge was removing."""
        try:
            entries = list(os.scandir(self._dir))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(_PURGING) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

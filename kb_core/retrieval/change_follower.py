"""Following the change feed: other processes' writes reach this process's L0 index within seconds.

A background thread checks the database's change feed every `interval` seconds (a `max(id)` query, never on
the lookup path) and applies what changed since its position: `KnowledgeIndex.refresh` re-reads each changed
file the way the scan does, in one snapshot swap per batch. This process's own writes come back too; they
leave the entry as it is, so they rebuild nothing. When the feed no longer reaches back to its position (it
was trimmed), the whole folder is rescanned. Every process trims rows older than `FEED_RETENTION` once an hour,
keeping the newest row: the feed stays small, and only a process down for longer than that pays a rescan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from kb_core.errors import KnowledgeBaseError
from kb_core.retrieval.keyword_index import KnowledgeIndex

log = logging.getLogger(__name__)

FEED_RETENTION = timedelta(days=7)
TRIM_EVERY = 3600.0  # seconds


class ChangeFeed(Protocol):
    def latest_change_id(self) -> int: ...

    def changes_since(self, after_id: int, limit: int = 1000) -> tuple[list, bool]: ...

    def trim_changes(self, older_than: datetime) -> int: ...


class ChangeFollower:
    def __init__(self, feed: ChangeFeed, index: KnowledgeIndex, *, interval: float = 1.0):
        self._feed = feed
        self._index = index
        self._interval = interval
        self._position = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned_at = 0.0
        self._listeners: list[Callable[[], None]] = []
        self._trimmed_at = time.monotonic()  # the first trim an hour after opening, not on every start

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` after each batch of changes applied (and after a rescan): cached summaries of the
        stores (`kb_core.summaries`) drop what another process's write made stale."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # noqa: BLE001 - a listener must not stop L0 from following the feed
                log.exception("a change listener failed")

    @property
    def position(self) -> int:
        return self._position

    def start_from_now(self) -> None:
        """Take the feed's current position (call it before the full scan: a change made during the scan is
        then applied again, never missed) and start following."""
        try:
            self._position = self._feed.latest_change_id()
        except KnowledgeBaseError as exc:
            self._warn(f"cannot read the change feed yet ({exc}); L0 follows other processes once it can")
            self._position = -1  # unknown: the first successful poll rescans
        if self._interval > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kb-change-follower", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
                self.trim_if_due()
            except Exception as exc:  # noqa: BLE001 - a follower that dies would silently freeze L0
                self._warn(f"following the change feed failed: {exc}")

    def trim_if_due(self, *, now: float | None = None) -> int:
        """Trim the feed once every `TRIM_EVERY` seconds (any process may; doing it twice is harmless)."""
        now = time.monotonic() if now is None else now
        if now - self._trimmed_at < TRIM_EVERY:
            return 0
        self._trimmed_at = now
        removed = self._feed.trim_changes(datetime.now(UTC).replace(tzinfo=None) - FEED_RETENTION)
        if removed:
            log.info("trimmed %d change-feed rows older than %s", removed, FEED_RETENTION)
        return removed

    def poll(self) -> int:
        """Apply what changed since the last position; returns the number of changes applied."""
        if self._position < 0:
            self._position = self._feed.latest_change_id()
            self._index.load()
            self._changed()
            return 0
        if self._feed.latest_change_id() <= self._position:
            return 0
        applied = 0
        while True:
            changes, complete = self._feed.changes_since(self._position)
            if not complete:
                log.warning("the change feed was trimmed past position %d: rescanning the folder", self._position)
                self._position = self._feed.latest_change_id()
                self._index.load()
                self._changed()
                return applied
            if not changes:
                return applied
            with self._index.bulk():
                for change in changes:
                    self._apply(change.file_path, change.operation, change.content_sha256)
            applied += len(changes)
            self._position = changes[-1].id
            self._changed()
            log.debug("applied %d changes from the feed (now at %d)", len(changes), self._position)

    def _apply(self, file_path: str, operation: str, content_sha256: str | None) -> None:
        if operation == "delete":
            self._index.remove(file_path)
        else:
            self._index.refresh(file_path, content_sha256)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at > 60:
            self._warned_at = now
            log.warning(message)

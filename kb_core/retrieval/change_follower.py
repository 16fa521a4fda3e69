"""Following the change feed: other processes' writes reach this process's L0 index within seconds.

A background thread checks the database's change feed every `interval` seconds (a `max(id)` query, never on
the lookup path) and applies what changed since its position: `KnowledgeIndex.refresh` re-reads each changed
file the way the scan does, in one snapshot swap per batch. This process's own writes come back too; they
leave the entry as it is, so they rebuild nothing. When the feed no longer reaches back to its position (it
was trimmed), the whole folder is rescanned. Every process trims rows older than `FEED_RETENTION` once an hour,
keeping the newest row: the feed stays small, and only a process down for longer than that pays a rescan.

Ids are handed out when a row is inserted, not when it commits (InnoDB): a write can commit after a later id is
already visible. So an id skipped over is remembered as a gap and looked up again on every poll until it
shows up or `GAP_GRACE` has passed (a rolled-back write leaves a gap that never fills).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from kb_core.errors import KnowledgeBaseError
from kb_core.keywords.index import KnowledgeIndex

log = logging.getLogger(__name__)

FEED_RETENTION = timedelta(days=7)
TRIM_EVERY = 3600.0  # seconds
GAP_GRACE = 60.0  # seconds a skipped id may still commit; no write keeps its transaction open that long
MAX_GAP = 1000  # a jump wider than this is the server's id allocation (a restart, a cluster step), not writes


class ChangeFeed(Protocol):
    def latest_change_id(self) -> int: ...

    def changes_since(self, after_id: int, limit: int = 1000) -> tuple[list, bool]: ...

    def trim_changes(self, older_than: datetime) -> int: ...

    def changes_with_ids(self, ids: list[int]) -> list: ...


class ChangeFollower:
    def __init__(self, feed: ChangeFeed, index: KnowledgeIndex, *, interval: float = 1.0):
        self._feed = feed
        self._index = index
        self._interval = interval
        self._position = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned_at = 0.0
        self.changes_applied = 0  # batches applied (and rescans): what cached summaries are keyed on
        self._trimmed_at = time.monotonic()  # the first trim an hour after opening, not on every start
        self._gaps: dict[int, float] = {}  # skipped ids that may still commit -> when first missed
        self._polled_at = time.time()  # the last time the feed was read: trimming cannot reach anything newer
        self._latest_seen = 0  # the feed's newest id at the last read (the lag metrics)
        self._chores: list[tuple[float, Callable[[], object], list[float]]] = []  # (every, task, [last run])

    def every(self, seconds: float, task: Callable[[], object]) -> None:
        """Run `task` on the follower's thread every `seconds` (e.g. recovering rows of writers that died):
        one background thread per knowledge base does the periodic work."""
        self._chores.append((seconds, task, [time.monotonic()]))

    def run_chores(self, *, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for seconds, task, last in self._chores:
            if now - last[0] >= seconds:
                last[0] = now
                try:
                    task()
                except Exception as exc:  # noqa: BLE001 - one failing chore must not stop the follower
                    self._warn(f"a background task failed: {exc}")

    def _changed(self) -> None:
        self.changes_applied += 1

    @property
    def position(self) -> int:
        return self._position

    @property
    def following(self) -> bool:
        return self._thread is not None

    @property
    def seconds_behind(self) -> float | None:
        """Seconds since this process last read the feed to its end (None: not following). Below the interval
        while it keeps up; it grows while the database cannot be read or a long batch is being applied."""
        return max(0.0, time.time() - self._polled_at) if self.following else None

    @property
    def changes_behind(self) -> int:
        """Changes the feed held at the last read that this process had not applied yet."""
        return max(0, self._latest_seen - self._position) if self._position >= 0 else 0

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
                self.run_chores()
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
        applied = self._fill_gaps()
        latest = self._latest_seen = self._feed.latest_change_id()
        if latest <= self._position:
            self._polled_at = time.time()
            return applied
        while True:
            changes, complete = self._feed.changes_since(self._position)
            # Rows missing before the first one returned were trimmed only if this process has not read the
            # feed for longer than trimming keeps rows; otherwise they are writes still open (or rolled back).
            if not complete and time.time() - self._polled_at > FEED_RETENTION.total_seconds() / 2:
                log.warning("the change feed was trimmed past position %d: rescanning the folder", self._position)
                self._position = self._feed.latest_change_id()
                self._gaps.clear()
                self._index.load()
                self._changed()
                return applied
            if not changes:
                self._polled_at = time.time()
                return applied
            self._note_gaps(changes)
            with self._index.bulk():
                for change in changes:
                    self._apply(change.file_path, change.operation, change.content_sha256)
            applied += len(changes)
            self._position = changes[-1].id
            self._changed()
            log.debug("applied %d changes from the feed (now at %d)", len(changes), self._position)

    def _note_gaps(self, changes: list) -> None:
        now, expected = time.monotonic(), self._position + 1
        for change in changes:
            if change.id - expected <= MAX_GAP:
                for missing in range(expected, change.id):
                    self._gaps.setdefault(missing, now)
            expected = change.id + 1

    def _fill_gaps(self) -> int:
        """Apply writes that committed after a later id was already applied; forget gaps older than the grace."""
        if not self._gaps:
            return 0
        now = time.monotonic()
        for missing, since in list(self._gaps.items()):
            if now - since > GAP_GRACE:
                del self._gaps[missing]
        if not self._gaps:
            return 0
        late = self._feed.changes_with_ids(sorted(self._gaps))
        if not late:
            return 0
        with self._index.bulk():
            for change in late:
                self._gaps.pop(change.id, None)
                self._apply(change.file_path, change.operation, change.content_sha256)
        self._changed()
        log.info("applied %d changes that committed after later ones", len(late))
        return len(late)

    def _apply(self, file_path: str, operation: str, content_sha256: str | None) -> None:
        if operation == "delete":
            self._index.remove_if_gone(file_path)
        else:
            self._index.refresh(file_path, content_sha256)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at > 60:
            self._warned_at = now
            log.warning(message)

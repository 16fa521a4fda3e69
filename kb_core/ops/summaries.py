"""Cached summaries of the stores (status counts, the document list, categories, the keyword map).

Every console page shows some of them on every rerun; recomputing them costs a Milvus count, SQL counts, a walk
of the folder and a read of every document row, which grows with the knowledge base. One rule decides
when they are stale: each is kept with the knowledge base's *version* it was computed at — this process's
write counter (moved before and after every write) and the number of change-feed batches applied (other
processes' writes) — and is recomputed once the version moved. `max_age` is a backstop for changes nobody
announces, such as files copied into the folder by hand.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class SummaryCache:
    def __init__(self, version: Callable[[], Hashable], max_age: float = 60.0):
        self.max_age = max_age
        self._version = version
        self._lock = threading.Lock()
        self._values: dict[str, tuple[Hashable, float, Any]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str, compute: Callable[[], T], *, max_age: float | None = None) -> T:
        """The cached value of `key` while the version is the one it was computed at (and it is younger than
        `max_age`), else `compute()`, kept with the version read *before* computing: a value computed while a
        change happened is stale at once."""
        limit = self.max_age if max_age is None else max_age
        version = self._version()
        with self._lock:
            entry = self._values.get(key)
            if entry is not None and entry[0] == version and time.monotonic() - entry[1] < limit:
                self.hits += 1
                return entry[2]
            self.misses += 1
        started = time.monotonic()
        value = compute()
        with self._lock:
            self._values[key] = (version, started, value)
        log.debug("summary %s recomputed in %.1f ms", key, (time.monotonic() - started) * 1000)
        return value

    def peek(self, key: str) -> tuple[Any, bool] | None:
        """The last value computed for `key` and whether it is still current, without computing anything
        (`None`: never computed). For readers that must stay cheap, such as a metrics scrape."""
        version = self._version()
        with self._lock:
            entry = self._values.get(key)
        if entry is None:
            return None
        return entry[2], entry[0] == version and time.monotonic() - entry[1] < self.max_age

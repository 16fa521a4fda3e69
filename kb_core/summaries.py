"""Cached summaries of the stores (status counts, the document list, categories, the keyword map).

Every console page shows some of them on every rerun; recomputing them costs a Milvus count, SQL counts, a walk
of the folder and a read of every document row, which grows with the knowledge base. They are kept until
something changes them: a write through this process's `KnowledgeBase` (which invalidates before and after
the write) or another process's write arriving through the change feed (`ChangeFollower` calls
`invalidate`). `max_age` is a backstop for changes nobody announces, such as files copied into the folder
by hand.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class SummaryCache:
    def __init__(self, max_age: float = 60.0):
        self.max_age = max_age
        self._lock = threading.Lock()
        self._generation = 0
        self._values: dict[str, tuple[float, Any]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str, compute: Callable[[], T], *, max_age: float | None = None) -> T:
        """The cached value of `key`, or `compute()` kept for later. A value computed while an invalidation
        happened is returned but not kept: it may predate the change."""
        limit = self.max_age if max_age is None else max_age
        with self._lock:
            entry = self._values.get(key)
            if entry is not None and time.monotonic() - entry[0] < limit:
                self.hits += 1
                return entry[1]
            generation = self._generation
            self.misses += 1
        started = time.monotonic()
        value = compute()
        with self._lock:
            if generation == self._generation:
                self._values[key] = (started, value)
        log.debug("summary %s recomputed in %.1f ms", key, (time.monotonic() - started) * 1000)
        return value

    def invalidate(self, *_: object) -> None:
        with self._lock:
            self._generation += 1
            self._values.clear()

"""Fakes for the lookup logic's unit tests."""

from __future__ import annotations

from kb_core import L1Hit


class RecordingL1:
    """A fake L1 searcher for the lookup logic's unit tests: returns canned hits and records every call."""

    def __init__(self, hits: list[L1Hit] | None = None, error: Exception | None = None):
        self.hits = hits or []
        self.error = error
        self.calls: list[tuple[str, int, str | None]] = []

    def search(self, query: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]:
        self.calls.append((query, top_k, category))
        if self.error is not None:
            raise self.error
        return list(self.hits[:top_k])


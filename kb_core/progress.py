"""The one progress callback type of kb_core, for long work the console shows as a progress bar."""

from __future__ import annotations

from collections.abc import Callable

# progress(stage, done, total): stages are "parsing", "chunking", "embedding", "saving", "indexing",
# "syncing", "reindexing", "editing" (a keyword plan, per document) and finally "done". `total` 0 means "not countable".
Progress = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    """The default callback: report nothing."""

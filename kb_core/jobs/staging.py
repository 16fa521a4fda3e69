"""Where an upload job's files wait for the worker: a hidden folder under the application root, outside the
scanned knowledge-base folder (a hidden folder is skipped by the scan and the watcher even if the knowledge base
is the application root itself). The page hands the bytes over once; the job then depends on nothing of the tab.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

STAGING_FOLDER = ".kb_jobs"


class StagingArea:
    def __init__(self, root: Path):
        self.root = root

    def stage(self, contents: Sequence[bytes]) -> str:
        """Write each content to a new folder of its own; its token names the folder."""
        token = uuid.uuid4().hex
        folder = self.root / token
        folder.mkdir(parents=True, mode=0o700)
        for i, data in enumerate(contents):
            (folder / f"{i:06d}").write_bytes(data)
        return token

    def read(self, token: str, index: int) -> bytes:
        return (self._folder(token) / f"{index:06d}").read_bytes()

    def remove(self, token: str | None) -> None:
        if token:
            shutil.rmtree(self._folder(token), ignore_errors=True)

    def sweep(self, keep: Iterable[str], older_than: float = 3600.0) -> list[str]:
        """Remove folders no active job names and older than `older_than` seconds (one being filled right now
        is young): what a process that died left behind."""
        kept = set(keep)
        removed = []
        try:
            folders = list(self.root.iterdir())
        except OSError:
            return []
        cutoff = time.time() - older_than
        for folder in folders:
            try:
                if folder.name in kept or folder.stat().st_mtime > cutoff:
                    continue
            except OSError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
        if removed:
            log.info("removed %d staged upload folders of jobs that ended", len(removed))
        return removed

    def _folder(self, token: str) -> Path:
        if not token or os.sep in token or token.startswith("."):
            raise ValueError(f"not a staging token: {token!r}")
        return self.root / token

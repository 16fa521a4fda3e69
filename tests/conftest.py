from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kb_core import L1Hit

REPO = Path(__file__).resolve().parent.parent
SAMPLE_KB = REPO / "knowledge_base"


@pytest.fixture
def sample_root(tmp_path: Path) -> Path:
    """An application root holding a copy of the shipped sample knowledge base."""
    shutil.copytree(SAMPLE_KB, tmp_path / "knowledge_base")
    return tmp_path


def write_doc(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def doc(title: str, keywords: list[str], summary: str = "summary", body: str = "# Body\n") -> str:
    return f"---\ntitle: {title}\nkeywords: [{', '.join(keywords)}]\nsummary: {summary}\n---\n\n{body}"


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

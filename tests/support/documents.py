"""Markdown documents for a test to write into a knowledge base."""

from __future__ import annotations

from pathlib import Path


def write_doc(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def doc(title: str, keywords: list[str], summary: str = "summary", body: str = "# Body\n") -> str:
    return f"---\ntitle: {title}\nkeywords: [{', '.join(keywords)}]\nsummary: {summary}\n---\n\n{body}"


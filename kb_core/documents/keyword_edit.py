"""Editing a document's keywords from the keyword map: a frontmatter edit of `keywords` alone
(`document_edit.prepare_frontmatter_edit`), kept under its earlier names."""

from __future__ import annotations

from collections.abc import Sequence

from kb_core.documents.document_edit import (
    FrontmatterEdit,
    KeywordEdit,
    check_unchanged,
    current_keywords,
    prepare_frontmatter_edit,
)
from kb_core.documents.entry import IndexedDocuments

__all__ = ["FrontmatterEdit", "KeywordEdit", "check_unchanged", "current_keywords", "prepare_keyword_edit"]


def prepare_keyword_edit(index: IndexedDocuments, file_path: str, keywords: Sequence[str], *,
                         max_bytes: int) -> KeywordEdit:
    """The document rewritten with new frontmatter keywords (nothing else changed), and its upload preview."""
    return prepare_frontmatter_edit(index, file_path, keywords=keywords, max_bytes=max_bytes)

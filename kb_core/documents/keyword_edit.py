"""Editing a document's keywords from the keyword map: the rewritten file and its upload preview.

The edit goes in through the normal upload path (`KnowledgeBase.upload`): same validation, same lint, same
atomic write to disk, database, Milvus and L0. Only the bytes differ from what is on disk, in the
frontmatter's `keywords` value (`frontmatter_edit.replace_keywords`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from kb_core.documents.entry import IndexedDocuments
from kb_core.documents.folder import decode_markdown
from kb_core.documents.frontmatter import parse_frontmatter_strict
from kb_core.documents.frontmatter_edit import clean_keywords, replace_keywords
from kb_core.documents.lint import UploadPreview, preview_upload
from kb_core.errors import FrontmatterError, UploadRejected


@dataclass(frozen=True)
class KeywordEdit:
    file_path: str
    file_name: str
    category: str
    before: tuple[str, ...]  # the frontmatter keywords on disk now (weak ones included)
    keywords: tuple[str, ...]  # what they become
    data: bytes  # the whole rewritten file
    base_sha256: str  # the file the edit was made from: saving refuses if it has changed since
    preview: UploadPreview

    @property
    def changed(self) -> bool:
        return self.keywords != self.before

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(k for k in self.keywords if k not in self.before)

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(k for k in self.before if k not in self.keywords)


def _read(index: IndexedDocuments, file_path: str, max_bytes: int) -> tuple[bytes, str, str, str]:
    """(bytes, text, category, file name) of a document the upload path can write back to the same place."""
    folder = index.folder
    if not folder.exists(file_path) or folder.resolve(file_path) is None:
        raise UploadRejected(f"{file_path} is not on disk: nothing to edit")
    category, name = folder.document_place(file_path)
    try:
        data = folder.read_bytes(file_path)
    except OSError as exc:
        raise UploadRejected(f"{file_path} cannot be read: {exc}") from exc
    return data, decode_markdown(data, max_bytes=max_bytes, file_name=name), category, name


def current_keywords(index: IndexedDocuments, file_path: str, *, max_bytes: int) -> tuple[str, ...]:
    """The keywords the document's frontmatter lists now, as written (weak ones too)."""
    _, text, _, _ = _read(index, file_path, max_bytes)
    fm = parse_frontmatter_strict(text)
    if fm is None:
        raise FrontmatterError(f"{file_path} has no frontmatter: L0 does not know it")
    return fm.keywords


def prepare_keyword_edit(index: IndexedDocuments, file_path: str, keywords: Sequence[str], *,
                         max_bytes: int) -> KeywordEdit:
    data, text, category, name = _read(index, file_path, max_bytes)
    fm = parse_frontmatter_strict(text)
    if fm is None:
        raise FrontmatterError(f"{file_path} has no frontmatter: L0 does not know it")
    new = clean_keywords(keywords)
    rewritten = data
    if new != fm.keywords:
        bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""  # decoding dropped it: keep it
        rewritten = bom + replace_keywords(text, new).encode("utf-8")
    preview = preview_upload(index, name, rewritten, category, max_bytes=max_bytes)
    return KeywordEdit(file_path, name, category, fm.keywords, new, rewritten, hashlib.sha256(data).hexdigest(),
                       preview)


def check_unchanged(index: IndexedDocuments, edit: KeywordEdit) -> None:
    """Refuse to save an edit made from a version of the file that is no longer the one on disk."""
    try:
        current = index.folder.read_bytes(edit.file_path)
    except OSError:
        current = None
    if current is None or hashlib.sha256(current).hexdigest() != edit.base_sha256:
        raise UploadRejected(f"{edit.file_path} changed on disk since the preview; nothing was written. "
                             "Open the document again and redo the edit.")

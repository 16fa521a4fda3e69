"""Editing a document's frontmatter in place — title, summary, keywords, sections — prepared with its upload
preview and a diff, then saved through the normal upload path.

`prepare_frontmatter_edit` reads the file, rewrites only the edited values (`frontmatter_edit.edit_frontmatter`),
and previews the result as the Upload page would (validation, lint, keyword clashes); nothing is written.
`KnowledgeBase.save_frontmatter_edit` then uploads the rewritten bytes (same validation, same atomic write to
disk, database, Milvus and L0), only if the file on disk is still the one the edit was made from
(`check_unchanged` before any work, and `upload(..., if_match=...)` under the document's lock).
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kb_core.documents.folder import decode_markdown
from kb_core.documents.frontmatter import parse_frontmatter_strict
from kb_core.documents.frontmatter_edit import (
    FIELDS,
    FrontmatterFields,
    clean_keywords,
    clean_sections,
    clean_summary,
    clean_title,
    edit_frontmatter,
    frontmatter_span,
)
from kb_core.documents.lint import UploadPreview, preview_upload
from kb_core.errors import EditConflictError, FrontmatterError, UploadRejected
from kb_core.keywords.entry import IndexedDocuments

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class FrontmatterEdit:
    """A prepared edit of one document's frontmatter: the whole rewritten file, what it changes, and its
    upload preview. `KnowledgeBase.save_frontmatter_edit` writes it."""

    file_path: str
    file_name: str
    category: str
    original: FrontmatterFields  # the fields on disk when the edit was prepared
    edited: FrontmatterFields  # what they become (read back from the rewritten file)
    fields: tuple[str, ...]  # the fields this edit changes, in `FIELDS` order; () changes nothing
    data: bytes  # the whole rewritten file
    base_sha256: str  # the file the edit was made from: saving refuses if it has changed since
    preview: UploadPreview
    diff: str = ""  # a unified diff of the frontmatter block, old to new ("" when nothing changes)

    @property
    def changed(self) -> bool:
        return bool(self.fields)

    # the keyword edit's view (the keyword map's edits use these)
    @property
    def keywords(self) -> tuple[str, ...]:
        return self.edited.keywords

    @property
    def before(self) -> tuple[str, ...]:
        """The keywords on disk (weak ones included)."""
        return self.original.keywords

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(k for k in self.edited.keywords if k not in self.original.keywords)

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(k for k in self.original.keywords if k not in self.edited.keywords)



def _read(index: IndexedDocuments, file_path: str) -> tuple[bytes, str, str, str]:
    """(bytes, text, category, file name) of a document the upload path can write back to the same place."""
    folder = index.folder
    if not isinstance(file_path, str) or not folder.exists(file_path) or folder.resolve(file_path) is None:
        raise UploadRejected(f"{file_path} is not on disk: nothing to edit")
    category, name = folder.document_place(file_path)
    try:
        data = folder.read_bytes(file_path)
    except OSError as exc:
        raise UploadRejected(f"{file_path} cannot be read: {exc}") from exc
    return data, decode_markdown(data, max_bytes=folder.max_bytes, file_name=name), category, name


def _fields_of(text: str, file_path: str) -> FrontmatterFields:
    try:
        return FrontmatterFields.of(parse_frontmatter_strict(text))
    except FrontmatterError as exc:
        raise FrontmatterError(f"{file_path}: the frontmatter cannot be edited in place ({exc}); fix the file by "
                               "hand") from exc


def current_fields(index: IndexedDocuments, file_path: str) -> FrontmatterFields:
    """The editable fields of a document's frontmatter on disk now (`exists` False: it has no block)."""
    _, text, _, _ = _read(index, file_path)
    return _fields_of(text, file_path)


def current_keywords(index: IndexedDocuments, file_path: str) -> tuple[str, ...]:
    """The keywords the document's frontmatter lists now, as written (weak ones too)."""
    fields = current_fields(index, file_path)
    if not fields.exists:
        raise FrontmatterError(f"{file_path} has no frontmatter: L0 does not know it")
    return fields.keywords


def requested_fields(*, title: object = None, summary: object = None, keywords: object = None,
                     sections: object = None) -> dict[str, object]:
    """The fields asked for (None: leave alone), cleaned as they will be written; `FrontmatterError` says what
    a value cannot be."""
    cleaners = {"title": clean_title, "summary": clean_summary, "keywords": clean_keywords,
                "sections": clean_sections}
    given = {"title": title, "summary": summary, "keywords": keywords, "sections": sections}
    return {field: cleaners[field](given[field]) for field in FIELDS if given[field] is not None}  # type: ignore


def frontmatter_diff(old: str, new: str, file_path: str) -> str:
    """A unified diff of the frontmatter blocks of two versions of a file (line endings aside)."""
    a0, a1 = frontmatter_span(old)
    b0, b1 = frontmatter_span(new)
    lines = difflib.unified_diff(old[a0:a1].splitlines(), new[b0:b1].splitlines(), f"a/{file_path}",
                                 f"b/{file_path}", lineterm="", n=2)
    return "\n".join(lines)


def prepare_frontmatter_edit(index: IndexedDocuments, file_path: str, *,
                             title: str | None = None, summary: str | None = None,
                             keywords: Sequence[str] | None = None,
                             sections: Mapping[str, str] | Sequence[tuple[str, str]] | None = None) -> FrontmatterEdit:
    """The document rewritten with the given fields (None: left alone; a value equal to the current one changes
    nothing), its upload preview and a diff of the frontmatter. Writes nothing."""
    data, text, category, name = _read(index, file_path)
    original = _fields_of(text, file_path)
    wanted = requested_fields(title=title, summary=summary, keywords=keywords, sections=sections)
    changes = {f: v for f, v in wanted.items() if getattr(original, f) != v}
    rewritten, edited, diff = data, original, ""
    if changes:
        new_text = edit_frontmatter(text, **changes)  # type: ignore[arg-type]
        bom = _BOM if data.startswith(_BOM) else b""  # decoding dropped it: keep it
        rewritten = bom + new_text.encode("utf-8")
        edited = FrontmatterFields.of(parse_frontmatter_strict(new_text))
        diff = frontmatter_diff(text, new_text, file_path)
    fields = tuple(f for f in FIELDS if f in changes)
    preview = preview_upload(index, name, rewritten, category)
    return FrontmatterEdit(file_path, name, category, original, edited, fields, rewritten,
                           hashlib.sha256(data).hexdigest(), preview, diff)


def check_unchanged(index: IndexedDocuments, edit: FrontmatterEdit) -> None:
    """Refuse to save an edit made from a version of the file that is no longer the one on disk."""
    try:
        current = index.folder.read_bytes(edit.file_path)
    except OSError:
        current = None
    found = hashlib.sha256(current).hexdigest() if current is not None else None
    if found != edit.base_sha256:
        raise EditConflictError(edit.file_path, edit.base_sha256, found)

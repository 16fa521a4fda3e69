"""What L0 knows of a document: its entry, built from the frontmatter (and the body, for the section list)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kb_core.documents.folder import KnowledgeFolder, decode_head
from kb_core.documents.frontmatter import Frontmatter, parse_frontmatter
from kb_core.documents.language import document_language, translation_key
from kb_core.documents.sections import outline
from kb_core.terms import MAX_KEYWORDS, weak_keyword_reason

__all__ = ["IndexedDocuments", "KnowledgeEntry", "entry_of_bytes", "entry_of_file", "split_keywords"]


@dataclass(frozen=True)
class KnowledgeEntry:
    file_path: str
    title: str
    keywords: tuple[str, ...]  # what L0 matches
    summary: str
    category: str | None = None
    # frontmatter keywords L0 ignores, with the reason: weak ones (`e`, `的`, `1`) and any beyond the 64th
    ignored_keywords: tuple[tuple[str, str], ...] = ()
    # `availableSections`, computed when the entry is built (never at lookup time); None: no headings
    sections: tuple[str, ...] | None = None
    # frontmatter `sections` found in the body: (curator's name, heading path)
    section_names: tuple[tuple[str, str], ...] = ()
    lang: str = "und"  # `en`, `zh`, ... (see `language.document_language`)
    group: str = ""  # the translation group it shares with its other language versions (`language.translation_key`)

    @classmethod
    def from_frontmatter(cls, file_path: str, fm: Frontmatter, category: str | None = None,
                         content: str | None = None) -> KnowledgeEntry:
        """`content` (the whole document) gives the entry its section list."""
        kept, ignored = split_keywords(fm.keywords)
        shape = outline(content, fm.sections) if content is not None else None
        name = file_path.rpartition("/")[2]
        relative = f"{category}/{name}" if category else name  # the language is read below the base
        text = content if content is not None else f"{fm.title}\n{fm.summary}"
        return cls(
            file_path=file_path,
            title=fm.title,
            keywords=kept,
            summary=fm.summary,
            category=category or fm.category,
            ignored_keywords=ignored,
            sections=shape.listed if shape else None,
            section_names=shape.names if shape else (),
            lang=document_language(relative, fm.extra, text),
            group=translation_key(relative, fm.extra),
        )


def split_keywords(keywords: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the keywords L0 uses, [(ignored keyword, why)]): weak keywords and any beyond the 64th are ignored."""
    kept: list[str] = []
    ignored: list[tuple[str, str]] = []
    for keyword in keywords:
        reason = weak_keyword_reason(keyword)
        if reason is None and len(kept) >= MAX_KEYWORDS:
            reason = f"more than {MAX_KEYWORDS} keywords"
        if reason is None:
            kept.append(keyword)
        else:
            ignored.append((keyword, reason))
    return tuple(kept), tuple(ignored)


def entry_of_file(folder: KnowledgeFolder, relative: str) -> KnowledgeEntry | None:
    """One file's L0 entry, read as the scan reads it (the head first, the rest only for a document with
    frontmatter); `None` without frontmatter. Raises `OSError`/`UnicodeDecodeError` for an unreadable file."""
    display = folder.display_path(relative)
    head, complete = folder.read_head(relative)
    fm = parse_frontmatter(head, source=display)
    if fm is None:
        return None
    if not complete:
        head = folder.read_bytes(display).decode("utf-8-sig")
    return KnowledgeEntry.from_frontmatter(display, fm, folder.category_of(relative), head)


def entry_of_bytes(folder: KnowledgeFolder, relative: str, data: bytes) -> KnowledgeEntry | None:
    """`entry_of_file` on bytes already read (parsed from the same head the scan would read)."""
    display = folder.display_path(relative)
    head, _complete = decode_head(data)
    fm = parse_frontmatter(head, source=display)
    if fm is None:
        return None
    return KnowledgeEntry.from_frontmatter(display, fm, folder.category_of(relative), data.decode("utf-8-sig"))


class IndexedDocuments(Protocol):
    """What upload previews and keyword edits need of L0 (`KnowledgeIndex` is one): the folder its documents
    live in, and which documents claim a keyword."""

    @property
    def folder(self) -> KnowledgeFolder: ...

    def claimants(self, keyword: str, *, page: str = "") -> list[str]: ...

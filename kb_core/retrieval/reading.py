"""Serving one document the way an answer's primary is served: its cleaned head (2,000 characters) or a named
section, with its section list and its other language versions.

A lookup serves the document its keywords chose (`lookup.HybridLookup`); `read_document` (the agents' second
tool) serves the document an agent names: a supplement's or an alternative's `source` from an earlier answer.
Both go through `DocumentReader`, so a document reads the same either way. Only indexed documents (L0 entries)
are served: a source is looked up in the index, never opened as a path, so nothing outside the knowledge base
can be read through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from kb_core.documents.scope import ALL, Scope
from kb_core.documents.sections import serve_section
from kb_core.errors import UnknownSourceError
from kb_core.keywords.entry import KnowledgeEntry
from kb_core.keywords.index import KnowledgeIndex
from kb_core.ops.logs import current_request_id, new_request_id

PRIMARY_MAX_CHARS = 2000
READ_MATCH_TYPE = "read"  # `primary.matchType` of a document served by `read_document`


@dataclass(frozen=True)
class Primary:
    content: str
    source: str
    confidence: str  # "high" | "low"
    match_type: str = "exact_L0"
    available_sections: tuple[str, ...] | None = None  # heading paths or curator's names; None: no headings
    section: str | None = None  # the heading path served instead of the document's head (`section_title`)
    translations: tuple[tuple[str, str], ...] = ()  # (source, lang) of the page's other language versions
    updated: str | None = None  # ISO 8601: the frontmatter's `updated`/`date`, else the file's modification
    version: str | None = None  # the frontmatter's `version`, when it has one

    def to_dict(self) -> dict[str, Any]:
        payload = {
            "content": self.content,
            "source": self.source,
            "matchType": self.match_type,
            "confidence": self.confidence,
            "availableSections": list(self.available_sections) if self.available_sections is not None else None,
            "section": self.section,
        }
        if self.translations:  # only for a page with translations: the spec's shape is unchanged otherwise
            payload["translations"] = [{"source": source, "lang": lang} for source, lang in self.translations]
        if self.updated is not None:  # how fresh the page is: an agent can tell a stale answer
            payload["updated"] = self.updated
        if self.version:
            payload["version"] = self.version
        return payload


@dataclass(frozen=True)
class ReadResult:
    """A document served by `read_document`: the lookup's JSON shape, with the document as the primary."""

    primary: Primary
    request_id: str
    section_title: str | None = None  # as asked (None: the document's head)
    note: str | None = None  # why a `section_title` was not served

    found = True
    supplement = None

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"found": True, "primary": self.primary.to_dict(), "supplement": None}
        if self.note is not None:
            payload["note"] = self.note
        return payload

    @property
    def match_types(self) -> tuple[str, ...]:
        return (self.primary.match_type,)


class DocumentReader:
    """Serves indexed documents as primaries (`read`) and a primary's section (`serve_section`)."""

    def __init__(self, index: KnowledgeIndex):
        self._index = index

    def entry(self, source: object) -> KnowledgeEntry | None:
        """The indexed document `source` names: its `source` as answers give it (`knowledge_base/api/x.md`),
        the path below the knowledge base (`api/x.md`) or the file's absolute path. `None` for anything else."""
        if not isinstance(source, str) or not source.strip() or "\x00" in source:
            return None
        source = source.strip()
        entry = self._index.get(source)
        if entry is not None:
            return entry
        folder = self._index.folder
        relative = PurePosixPath(source.replace("\\", "/"))
        if not relative.is_absolute() and ".." not in relative.parts:
            entry = self._index.get(folder.display_path(relative.as_posix()))
            if entry is not None:
                return entry
        below = folder.relative_of(source)  # an absolute path under the base
        return self._index.get(folder.display_path(below)) if below else None

    def freshness(self, entry: KnowledgeEntry) -> tuple[str | None, str | None]:
        """(updated, version) of a served page: the frontmatter's `updated` (or `date`), else the file's
        modification time, in ISO 8601 (UTC); the frontmatter's `version` or None."""
        updated = entry.updated or None
        if updated is None:
            path = self._index.folder.resolve(entry.file_path)
            try:
                mtime = os.stat(path).st_mtime if path is not None else None
            except OSError:
                mtime = None
            if mtime is not None:
                updated = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return updated, entry.version or None

    def read(self, source: object, section_title: str | None = None, *, scope: Scope = ALL,
             language: str | None = None) -> ReadResult:
        """The document as a primary (`matchType` "read", confidence "high"): its cleaned head cut at 2,000
        characters, or with `section_title` that section (or the head and a `note`); with `language`, the
        page's version in that language when it has one. `UnknownSourceError` when `source` is no indexed
        document the caller may read (`scope`: a page outside it reads as missing) or its file can no longer
        be read."""
        entry = self.entry(source)
        if entry is not None and not scope.may_read(entry.category, entry.audience):
            entry = None  # not there for this caller: the same error as a missing page
        if entry is None:
            raise UnknownSourceError(
                f"no indexed document at {_shown(source)}; pass a source from an answer (primary.source, "
                "supplement.source, alternatives[].source) or a path below the knowledge base such as "
                "'category/file.md'")
        content = self._index.excerpt(entry.file_path, PRIMARY_MAX_CHARS, clean=True)
        if content is None:
            raise UnknownSourceError(f"{entry.file_path} is indexed but its file could not be read (deleted, "
                                     "moved or no longer a regular file); look it up again")
        versions = [v for v in self._index.versions(entry.file_path) if scope.may_read(v.category, v.audience)]
        note = None
        if language is not None and entry.lang != language:
            chosen = next((v for v in versions if v.lang == language), None)
            read = chosen and self._index.excerpt(chosen.file_path, PRIMARY_MAX_CHARS, clean=True)
            if chosen is not None and read is not None:
                entry, content = chosen, read
            else:
                note = f"{entry.file_path} has no version in language '{language}': served as it is ({entry.lang})"
        updated, version = self.freshness(entry)
        primary = Primary(
            content=content,
            source=entry.file_path,
            confidence="high",
            match_type=READ_MATCH_TYPE,
            available_sections=entry.sections,
            translations=tuple((v.file_path, v.lang) for v in versions if v.file_path != entry.file_path),
            updated=updated,
            version=version,
        )
        title = section_title.strip() if isinstance(section_title, str) else ""
        if title:
            primary, section_note = self.serve_section(primary, entry, title)
            note = section_note or note
        return ReadResult(primary=primary, request_id=current_request_id() or new_request_id(),
                          section_title=title or None, note=note)

    def serve_section(self, primary: Primary, entry: KnowledgeEntry, title: str) -> tuple[Primary, str | None]:
        """The primary with `content` = the named section (cut like any answer), or unchanged and a note."""
        text = self._index.excerpt(entry.file_path, -1)
        if text is None:
            return primary, f"section '{title}' could not be read: the document is gone"
        served = serve_section(text, title, entry.section_names, entry.sections)
        if served.content is None:
            return primary, served.note
        content = served.content
        if len(content) > PRIMARY_MAX_CHARS:
            content = content[:PRIMARY_MAX_CHARS] + "..."
        return replace(primary, content=content, section=served.path), None


def _shown(source: object) -> str:
    return repr(source[:200]) if isinstance(source, str) else f"a {type(source).__name__}"

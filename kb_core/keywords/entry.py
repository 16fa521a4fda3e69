"""What L0 knows of a document: its entry, built from the frontmatter (and the body, for the section list)."""

from __future__ import annotations

import json
import logging
import sys
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError
from typing import Any, Protocol

import numpy as np

from kb_core.documents.cleaning import first_heading
from kb_core.documents.folder import KnowledgeFolder, decode_head
from kb_core.documents.frontmatter import Frontmatter, parse_frontmatter
from kb_core.documents.language import document_language, translation_key
from kb_core.documents.sections import outline
from kb_core.terms import MAX_KEYWORDS, weak_keyword_reason

__all__ = ["IndexedDocuments", "KnowledgeEntry", "entries_of_columns", "entry_columns", "entry_of_bytes",
           "entry_of_file", "shared_entry", "split_keywords"]


class KnowledgeEntry:
    """What L0 holds of one document: a frozen value (compared, hashed and pickled by its fields).

    Every process holds one per document (100,000 of them at scale), so it is kept small: the fields L0
    matches, groups and scans by are attributes (keywords, category and language shared between documents
    through `sys.intern`; ignored keywords, nearly always the shared empty tuple, which the keyword map and
    keyword plans read for every entry), and the ones only answers and pages read of a few entries (title,
    summary, sections) are one compact blob (`_pack`: JSON, data only), decoded when read (about five
    microseconds), equal bytes for equal values."""

    __slots__ = ("file_path", "keywords", "category", "lang", "group", "ignored_keywords", "audience", "_cold")
    FIELDS = ("file_path", "title", "keywords", "summary", "category", "ignored_keywords", "sections",
              "section_names", "lang", "group", "audience", "updated", "version")

    file_path: str
    keywords: tuple[str, ...]  # what L0 matches
    category: str | None
    lang: str  # `en`, `zh`, ... (see `language.document_language`)
    group: str  # the translation group it shares with its other language versions (`language.translation_key`)
    ignored_keywords: tuple[tuple[str, str], ...]
    audience: tuple[str, ...]  # frontmatter `audience`: the groups that may read it (empty: everyone)

    def __init__(self, file_path: str, title: str, keywords: Iterable[str], summary: str,
                 category: str | None = None, ignored_keywords: Iterable[tuple[str, str]] = (),
                 sections: Iterable[str] | None = None, section_names: Iterable[tuple[str, str]] = (),
                 lang: str = "und", group: str = "", audience: Iterable[str] = (), updated: str = "",
                 version: str = ""):
        """`ignored_keywords`: frontmatter keywords L0 ignores, with the reason (weak ones such as `e`, `的`,
        `1`, and any beyond the 64th); `sections`: `availableSections`, computed when the entry is built (never
        at lookup time), None without headings; `section_names`: frontmatter `sections` found in the body
        (curator's name, heading path); `audience`: who may read it (`documents.scope`); `updated`, `version`:
        the frontmatter's, as text ("" without)."""
        cold = (_text(title), _text(summary), None if sections is None else tuple(map(_text, sections)),
                tuple((_text(n), _text(h)) for n, h in section_names), _text(updated), _text(version))
        _init(self, file_path, tuple(_intern(_text(k)) for k in keywords),
              None if category is None else _intern(_text(category)), _intern(_text(lang)), _text(group),
              tuple((_text(k), _text(r)) for k, r in ignored_keywords), _audience(audience), _pack(cold))

    def _cold_fields(self) -> tuple[str, str, tuple[str, ...] | None, tuple[tuple[str, str], ...], str, str]:
        return _unpack(self._cold)

    @property
    def title(self) -> str:
        return self._cold_fields()[0]

    @property
    def summary(self) -> str:
        return self._cold_fields()[1]

    @property
    def sections(self) -> tuple[str, ...] | None:
        return self._cold_fields()[2]

    @property
    def section_names(self) -> tuple[tuple[str, str], ...]:
        return self._cold_fields()[3]

    @property
    def updated(self) -> str:
        """The frontmatter's `updated` (or `date`), as written; "" without."""
        return self._cold_fields()[4]

    @property
    def version(self) -> str:
        """The frontmatter's `version`, as written; "" without."""
        return self._cold_fields()[5]

    def _key(self) -> tuple[Any, ...]:
        return (self.file_path, self.keywords, self.category, self.lang, self.group, self.ignored_keywords,
                self.audience, self._cold)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not KnowledgeEntry:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore, (self.file_path, self.keywords, self.category, self.lang, self.group, self.ignored_keywords,
                          self.audience, self._cold)

    def __repr__(self) -> str:
        return f"KnowledgeEntry({', '.join(f'{name}={getattr(self, name)!r}' for name in self.FIELDS)})"

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def replace(self, **changes: Any) -> KnowledgeEntry:
        """A copy with some fields changed (what `dataclasses.replace` does for a dataclass)."""
        unknown = set(changes) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"KnowledgeEntry has no field(s) {', '.join(sorted(unknown))}")
        return KnowledgeEntry(**{**self.as_dict(), **changes})

    __replace__ = replace

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
            title=fm.title or (first_heading(content) if content is not None else ""),
            keywords=kept,
            summary=fm.summary,
            category=category or fm.category,
            ignored_keywords=ignored,
            sections=shape.listed if shape else None,
            section_names=shape.names if shape else (),
            lang=document_language(relative, fm.extra, text),
            group=translation_key(relative, fm.extra),
            audience=audience_of(fm.extra),
            updated=_scalar(fm.extra.get("updated", fm.extra.get("date"))),
            version=_scalar(fm.extra.get("version")),
        )


_COMPRESS_FROM = 128  # bytes: a blob of headings and prose this long compresses by about a third
_NO_COLD = ("", "", None, (), "", "")


def _pack(cold: tuple[Any, ...]) -> bytes:
    """Compact JSON (data only: the blob is saved in the L0 snapshot, and nothing read back from a file may be
    able to hold code - marshal can), deflated when that is smaller (a deflate stream starts with 0x78, the JSON
    array with `[`: the first byte tells them apart). Equal values pack to equal bytes."""
    data = _dumps(cold).encode("utf-8")
    if len(data) >= _COMPRESS_FROM:
        packed = zlib.compress(data, 6)
        if len(packed) < len(data):
            return packed
    return data


def _unpack(data: bytes) -> tuple[str, str, tuple[str, ...] | None, tuple[tuple[str, str], ...], str, str]:
    try:
        title, summary, sections, names, updated, version = _loads(
            zlib.decompress(data) if data[:1] == b"\x78" else data)
        if type(title) is not str or type(summary) is not str or type(updated) is not str or \
                type(version) is not str:
            raise ValueError("title, summary, updated and version are text")
        if sections is not None:
            sections = tuple(sections)
            if not all(type(s) is str for s in sections):
                raise ValueError("sections are text")
        names = tuple((n, h) for n, h in names if type(n) is str and type(h) is str)
    except (ValueError, TypeError, zlib.error) as exc:  # only a forged snapshot can hold such a blob
        _log.warning("an L0 entry's title, summary and sections are unreadable (%s): read as empty", exc)
        return _NO_COLD
    return title, summary, sections, names, updated, version


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_loads = json.loads
_log = logging.getLogger(__name__)
_init_field = object.__setattr__


def _init(entry: KnowledgeEntry, file_path: str, keywords: tuple[str, ...], category: str | None, lang: str,
          group: str, ignored: tuple[tuple[str, str], ...], audience: tuple[str, ...], cold: bytes) -> None:
    _init_field(entry, "file_path", file_path)
    _init_field(entry, "keywords", keywords)
    _init_field(entry, "category", category)
    _init_field(entry, "lang", lang)
    _init_field(entry, "group", group)
    _init_field(entry, "ignored_keywords", ignored)
    _init_field(entry, "audience", audience)
    _init_field(entry, "_cold", cold)


def _restore(file_path: str, keywords: tuple[str, ...], category: str | None, lang: str, group: str,
             ignored: tuple[tuple[str, str], ...], audience: tuple[str, ...], cold: bytes) -> KnowledgeEntry:
    """Unpickling: the fields as pickled (strings shared between entries stay shared: pickle keeps identity)."""
    entry = _new(KnowledgeEntry)
    _init(entry, file_path, keywords, category, lang, group, ignored, audience, cold)
    return entry


def shared_entry(file_path: str, keywords: tuple[str, ...], category: str | None, lang: str, group: str,
                 ignored: tuple[tuple[str, str], ...], audience: tuple[str, ...], cold: bytes) -> KnowledgeEntry:
    """`_restore` of an entry made in another process (`parallel_scan`), its keywords, category, language and
    audience shared with this process's entries as `__init__` shares them."""
    entry = _new(KnowledgeEntry)
    _init(entry, file_path, tuple(map(_intern, keywords)), None if category is None else _intern(category),
          _intern(lang), group, ignored, _audience(audience) if audience else (), cold)
    return entry


_audiences: dict[tuple[str, ...], tuple[str, ...]] = {}


def _audience(groups: Iterable[str]) -> tuple[str, ...]:
    """Sorted, distinct, one tuple shared by every entry with the same groups (most have none, or a few sets)."""
    key = tuple(sorted({_intern(_text(g)) for g in groups}))
    return _audiences.setdefault(key, key) if len(_audiences) < 10_000 else key


def audience_of(extra: Mapping[str, Any]) -> tuple[str, ...]:
    """The frontmatter's `audience`: a group name or a list of them (blank names and other values ignored)."""
    value = extra.get("audience")
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(v.strip() for v in values if isinstance(v, str) and v.strip())


def _scalar(value: object) -> str:
    """A frontmatter date or version as text (YAML reads `2026-11-30` as a date: ISO 8601 again)."""
    if value is None or isinstance(value, (dict, list, bool)):
        return ""
    iso = getattr(value, "isoformat", None)
    return str(iso() if callable(iso) else value).strip()[:64]


_new = object.__new__


def entry_columns(entries: Sequence[KnowledgeEntry]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The entries as plain data, what the L0 snapshot saves and `entries_of_columns` takes back: named flat
    arrays (the distinct strings once, as one text and where each ends; keywords, category, language and group
    as ids into them; the packed title/summary/section blobs joined, with their ends) and, as JSON-able data,
    the rare ignored keywords. The file path is not among them: it is the record's path."""
    ids: dict[str, int] = {}
    code = ids.setdefault
    keywords: list[int] = []
    counts: list[int] = []
    for e in entries:
        keywords += [code(k, len(ids)) for k in e.keywords]
        counts.append(len(e.keywords))
    categories = [-1 if e.category is None else code(e.category, len(ids)) for e in entries]
    audience: list[int] = []
    for e in entries:
        audience += [code(g, len(ids)) for g in e.audience]
    langs = [code(e.lang, len(ids)) for e in entries]
    groups = [code(e.group, len(ids)) for e in entries]
    strings = list(ids)
    arrays = {
        "strings": "".join(strings).encode("utf-8"),
        "string_ends": _ends(len(s) for s in strings),
        "keywords": _int32(keywords), "keyword_ends": _ends(counts),
        "category": _int32(categories), "lang": _int32(langs), "group": _int32(groups),
        "audience": _int32(audience), "audience_ends": _ends(len(e.audience) for e in entries),
        "cold": b"".join(e._cold for e in entries), "cold_ends": _ends(len(e._cold) for e in entries),
    }
    ignored = [[n, [list(pair) for pair in e.ignored_keywords]] for n, e in enumerate(entries) if e.ignored_keywords]
    return arrays, {"ignored_keywords": ignored}


def entries_of_columns(paths: Sequence[str], arrays: Mapping[str, bytes | memoryview],
                       extra: Any) -> list[KnowledgeEntry]:
    """Entries from what `entry_columns` gave, read back from a file: every array is checked (lengths, order,
    ids in range), so a value can only be one of the saved strings (a `ValueError` otherwise), and the strings
    entries share are one object again."""
    n = len(paths)
    text = bytes(arrays["strings"]).decode("utf-8")
    string_ends = _read_ends(arrays["string_ends"], len(text))
    table = [_intern(text[a:b]) for a, b in zip(_starts(string_ends), string_ends, strict=True)]
    keyword_ids = _read_ids(arrays["keywords"], len(table))
    keyword_ends = _read_ends(arrays["keyword_ends"], len(keyword_ids))
    cold_data = bytes(arrays["cold"])
    cold_ends = _read_ends(arrays["cold_ends"], len(cold_data))
    categories, langs, groups = (_read_ids(arrays[name], len(table), allow_none=name == "category")
                                 for name in ("category", "lang", "group"))
    audience_ids = _read_ids(arrays["audience"], len(table))
    audience_ends = _read_ends(arrays["audience_ends"], len(audience_ids))
    if not (len(keyword_ends) == len(cold_ends) == len(categories) == len(langs) == len(groups) ==
            len(audience_ends) == n):
        raise ValueError("entry columns of inconsistent lengths")
    ignored: dict[int, tuple[tuple[str, str], ...]] = {}
    listed = extra.get("ignored_keywords") if isinstance(extra, dict) else None
    if type(listed) is not list:
        raise ValueError("no ignored keywords column")
    for item in listed:
        row, pairs = item
        if not (type(row) is int and 0 <= row < n and type(pairs) is list and pairs and all(
                type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is str for p in pairs)):
            raise ValueError("ignored keywords of another shape")
        ignored[row] = tuple((k, r) for k, r in pairs)
    if n and not (np.diff(np.asarray(cold_ends, dtype=np.int64), prepend=0) > 0).all():
        raise ValueError("an entry without its title and summary")
    words = [table[i] for i in keyword_ids]
    starts, cold_starts = _starts(keyword_ends), _starts(cold_ends)
    groups_of = [table[i] for i in audience_ids]
    return list(map(_restore, paths,
                    [tuple(words[a:b]) for a, b in zip(starts, keyword_ends, strict=True)],
                    [None if i < 0 else table[i] for i in categories],
                    [table[i] for i in langs],
                    [table[i] for i in groups],
                    [ignored.get(row, ()) for row in range(n)] if ignored else [()] * n,
                    [_audience(groups_of[a:b]) if b > a else () for a, b in
                     zip(_starts(audience_ends), audience_ends, strict=True)],
                    [cold_data[a:b] for a, b in zip(cold_starts, cold_ends, strict=True)]))


def _starts(ends: Sequence[int]) -> list[int]:
    """Where each item starts, given where each ends (none for none: the snapshot of an empty folder)."""
    return [0, *ends[:-1]] if len(ends) else []


def _int32(values: Sequence[int]) -> bytes:
    return array("i", values).tobytes()


def _ends(lengths: Iterable[int]) -> bytes:
    out, total = array("q"), 0
    for length in lengths:
        total += length
        out.append(total)
    return out.tobytes()


def _read_ends(data: bytes | memoryview, length: int) -> list[int]:
    """Ends of consecutive parts of something `length` long: ascending, the last one `length`."""
    ends = int_array(data, "q")
    if (len(ends) and (ends[-1] != length or ends[0] < 0)) or (not len(ends) and length) or (
            len(ends) > 1 and not (np.diff(np.frombuffer(ends, dtype=np.int64)) >= 0).all()):
        raise ValueError("part ends out of order")
    return ends.tolist()


def _read_ids(data: bytes | memoryview, bound: int, *, allow_none: bool = False) -> list[int]:
    ids = int_array(data, "i")
    if len(ids):
        values = np.frombuffer(ids, dtype=np.int32)
        if values.max() >= bound or values.min() < (-1 if allow_none else 0):
            raise ValueError("string ids out of range")
    return ids.tolist()


def int_array(data: bytes | memoryview, typecode: str) -> array:
    """Machine integers of one type read back from bytes (`ValueError` for a partial item)."""
    out = array(typecode)
    if len(data) % out.itemsize:
        raise ValueError("an array of a partial item")
    out.frombytes(data)
    return out


_intern = sys.intern


def _text(value: object) -> str:
    """A plain `str` (`sys.intern` takes no subclass)."""
    return value if type(value) is str else str(value)


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

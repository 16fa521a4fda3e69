"""Rewrite a document's frontmatter fields — `title`, `summary`, `keywords`, `sections` — in its file text, every
other byte as it was.

A YAML round trip (load, change, dump) would reorder keys, drop comments, re-quote scalars and re-wrap the
summary, so a one-word fix would show up as a rewrite of the whole block in `git diff`. Here PyYAML only
*locates* each edited value (node marks); the new value replaces exactly that span, in the style it had where
the new value allows it:

- a scalar (`title`, `summary`) stays plain, single-quoted, double-quoted, folded (`>`, re-wrapped at the old
  width) or literal (`|`); a value that style cannot hold exactly is written double-quoted, with escapes;
- `keywords` stays a block list (same indent), a flow list or a comma-separated string;
- `sections` stays a block mapping (same indent) or a flow mapping; emptied, the key is removed.

Comments inside an old value go with it; comments, key order, line endings, a BOM and the body around it stay
byte for byte. A field the block lacks is inserted where it reads naturally (`title` first, `keywords` after
`title`, `summary` after `keywords`, `sections` last); a document without a frontmatter block gets one, holding
just the edited fields. A block that is there but not valid YAML is refused: fixing it is a job for a person.

Pure: text in, text out. The result is parsed again (with the parser L0 and uploads use) and refused unless it
yields exactly the new values of the edited fields and the same everything else; the body is compared too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kb_core.documents.frontmatter import (
    KEYWORD_SEPARATORS,
    Frontmatter,
    parse_frontmatter_strict,
    split_body,
)
from kb_core.errors import FrontmatterError
from kb_core.terms import normalize_term

FIELDS = ("title", "keywords", "summary", "sections")  # the editable fields, in the order they are inserted
MAX_SECTION_NAME = 200  # characters: a YAML implicit key must stay short (1,024 at most), and names are labels

_CLOSE = ("---", "...")
# A plain YAML scalar inside a flow list that every YAML reader reads back as the same string: starts with a
# letter, digit or CJK character, no indicator or separator characters, and not a word YAML 1.1 readers turn
# into a bool/null.
_PLAIN = re.compile(r"^[^\s\-?:,\[\]{}#&*!|>'\"%@`][^:#,\[\]{}\n\r\t'\"]*(?<!\s)$")
# The same outside flow context (a block mapping's value): commas and brackets are text there.
_PLAIN_BLOCK = re.compile(r"^[^\s\-?:,\[\]{}#&*!|>'\"%@`][^#\n\r\t'\"]*(?<![\s:])$")
_YAML_WORDS = frozenset("y n yes no on off true false null ~ << =".split())
_NUMBER = re.compile(r"^[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?$|^0[xob]|^\.(inf|nan)$", re.IGNORECASE)
_BLOCK_HEADER = re.compile(r"^([|>])([-+]?)(\d?)([-+]?)")
# Characters written as an escape in a double-quoted scalar (and so never plain, quoted with ' or in a block):
# C0/C1 controls, DEL, YAML's own line breaks, the BOM and the two non-characters of the BMP.
_ESCAPED = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0", "\x07": "\\a",
            "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f", "\x1b": "\\e", "\x85": "\\N", "\u2028": "\\L",
            "\u2029": "\\P"}
_LINE_BREAKS = frozenset("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines() splits on


@dataclass(frozen=True)
class FrontmatterFields:
    """The editable fields of a document's frontmatter, as the parser reads them (`exists`: False for a document
    without a frontmatter block, whose fields are all empty)."""

    title: str = ""
    summary: str = ""
    keywords: tuple[str, ...] = ()
    sections: tuple[tuple[str, str], ...] = ()
    exists: bool = True

    @classmethod
    def of(cls, fm: Frontmatter | None) -> FrontmatterFields:
        if fm is None:
            return cls(exists=False)
        return cls(fm.title, fm.summary, fm.keywords, fm.sections)


# -- the values: cleaned as the parser will read them back, or refused with the reason ------------------------
def _needs_escape(char: str) -> bool:
    category = unicodedata.category(char)
    return category in ("Cc", "Cs") or char in "\u2028\u2029\ufeff\ufffe\uffff"


def _check_text(value: object, what: str, *, lines: bool = False) -> str:
    if not isinstance(value, str):
        raise FrontmatterError(f"{what} must be text, not {type(value).__name__}")
    for char in value:
        if unicodedata.category(char) == "Cs":
            raise FrontmatterError(f"{what} holds a lone surrogate (U+{ord(char):04X}), which no UTF-8 file can "
                                   "store")
        if char in _LINE_BREAKS and not (lines and char in "\r\n"):
            if lines:
                raise FrontmatterError(f"{what} holds the line separator U+{ord(char):04X}: use an ordinary line "
                                       "break")
            raise FrontmatterError(f"{what} spans lines: it is one line")
        if unicodedata.category(char) == "Cc" and char not in "\t\r\n":
            raise FrontmatterError(f"{what} holds the control character U+{ord(char):04X}: remove it")
    return value


def clean_title(title: object) -> str:
    """The title as it will be read back: one line, trimmed."""
    return _check_text(title, "the title").strip()


def clean_summary(summary: object) -> str:
    """The summary as it will be read back: trimmed; it may span lines (`\\r\\n` and `\\r` become `\\n`)."""
    text = _check_text(summary, "the summary", lines=True)
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def clean_keywords(keywords: Sequence[str]) -> tuple[str, ...]:
    """The keywords as they will be written: trimmed, blank and repeated (after normalisation) ones dropped.
    A keyword spanning lines is refused: YAML would fold it and L0 would never match it as typed."""
    if isinstance(keywords, str):
        raise FrontmatterError("keywords must be a list of texts, not one text")
    kept: list[str] = []
    seen: set[str] = set()
    for keyword in keywords:
        if not isinstance(keyword, str):
            raise FrontmatterError(f"a keyword must be text, not {type(keyword).__name__}")
        keyword = keyword.strip()
        if any(ch in keyword for ch in "\r\n\x00"):
            raise FrontmatterError(f"keyword {keyword!r} spans lines: one keyword per line")
        if any(unicodedata.category(ch) == "Cs" for ch in keyword):
            raise FrontmatterError(f"keyword {keyword!r} holds a lone surrogate, which no UTF-8 file can store")
        term = normalize_term(keyword)
        if term and term not in seen:
            seen.add(term)
            kept.append(keyword)
    return tuple(kept)


def clean_sections(sections: Mapping[str, str] | Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(name, heading line) pairs as they will be written: trimmed; an empty name or heading, a name used twice
    (after normalisation) or a line break is refused, since the parser would drop or change it."""
    pairs = list(sections.items()) if isinstance(sections, Mapping) else list(sections)
    cleaned: list[tuple[str, str]] = []
    seen: set[str] = set()
    for pair in pairs:
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise FrontmatterError(f"a section is a (name, heading line) pair, not {pair!r}")
        name = _check_text(pair[0], "a section name").strip()
        heading = _check_text(pair[1], f"the heading of section “{name}”").strip()
        if not name:
            raise FrontmatterError(f"a section name is empty (heading {heading!r})")
        if not heading:
            raise FrontmatterError(f"section “{name}” needs a heading line (e.g. \"## 1. Timeouts\")")
        if len(name) > MAX_SECTION_NAME:
            raise FrontmatterError(f"section name “{name[:40]}…” is longer than {MAX_SECTION_NAME} characters")
        if normalize_term(name) in seen:
            raise FrontmatterError(f"section “{name}” is named twice")
        seen.add(normalize_term(name))
        cleaned.append((name, heading))
    return tuple(cleaned)


def parse_section_lines(text: str) -> tuple[tuple[str, str], ...]:
    """`name: heading line` per line (the console's sections box; split at the first `: `), blank lines
    skipped, cleaned as `clean_sections`."""
    pairs = []
    for number, line in enumerate(str(text).splitlines(), 1):
        if not line.strip():
            continue
        name, sep, heading = line.partition(": ")
        if not sep:
            name, sep, heading = line.rstrip().partition(":") if line.rstrip().endswith(":") else ("", "", "")
        if not sep:
            raise FrontmatterError(f"line {number} ({line.strip()[:60]!r}): write a section as `name: heading "
                                   "line`, e.g. `Timeouts: ## 1. Timeouts`")
        pairs.append((name, heading))
    return clean_sections(pairs)


def section_lines(sections: Sequence[tuple[str, str]]) -> str:
    """The inverse of `parse_section_lines`."""
    return "\n".join(f"{name}: {heading}" for name, heading in sections)


# -- scalars in each YAML style --------------------------------------------------------------------------------
def _quoted(value: str) -> str:
    """A YAML double-quoted scalar for any text (escapes for what a reader would change or refuse)."""
    out = ['"']
    for char in value:
        if char in _ESCAPED:
            out.append(_ESCAPED[char])
        elif _needs_escape(char):
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _plain_word_ok(value: str) -> bool:
    return value.casefold() not in _YAML_WORDS and not _NUMBER.match(value) and not any(
        _needs_escape(c) for c in value)


def _scalar(keyword: str) -> str:
    """A scalar inside a flow collection (a keyword, a flow mapping's key or value)."""
    if _PLAIN.match(keyword) and _plain_word_ok(keyword):
        return keyword
    return _quoted(keyword)


def _block_plain(value: str) -> str | None:
    """`value` as a plain scalar in block context (a mapping's value), or None when it cannot be one."""
    if not _PLAIN_BLOCK.match(value) or not _plain_word_ok(value) or ": " in value or " #" in value:
        return None
    return value


def _single_quoted(value: str) -> str | None:
    if "\n" in value or "\t" in value or any(_needs_escape(c) for c in value):
        return None
    return "'" + value.replace("'", "''") + "'"


def _flow(keywords: Sequence[str]) -> str:
    return "[" + ", ".join(_scalar(k) for k in keywords) + "]"


def _mapping_line(name: str, heading: str, safe: bool) -> str:
    key = None if safe else _block_plain(name)
    value = None if safe else _block_plain(heading)
    return f"{key or _quoted(name)}: {value or _quoted(heading)}"


def _wrap(line: str, width: int) -> list[str]:
    """A folded scalar's line cut at single spaces so no piece is longer than `width` (where it can be cut);
    folding joins the pieces back with one space each."""
    pieces: list[str] = []
    rest = line
    while len(rest) > width:
        cut = -1
        for i in range(min(width, len(rest) - 1), 0, -1):
            if rest[i] == " " and rest[i - 1] not in " \t" and rest[i + 1] not in " \t":
                cut = i
                break
        if cut == -1:
            break
        pieces.append(rest[:cut])
        rest = rest[cut + 1:]
    pieces.append(rest)
    return pieces


def _block_scalar(value: str, style: str, chomp: str, indent: str, newline: str, width: int,
                  comment: str) -> str | None:
    """`value` as a literal (`|`) or folded (`>`) block scalar, or None when that style cannot hold it."""
    lines = value.split("\n")
    if not value or lines[0][:1] in (" ", "\t") or any(_needs_escape(c) for c in value.replace("\n", "")):
        return None
    if any(line[:1] in (" ", "\t") or line.endswith((" ", "\t")) for line in lines) and style == ">":
        return None  # more-indented lines and trailing blanks fold differently: say it with escapes
    out: list[str] = []
    if style == "|":
        out = lines
    else:
        blank = 0
        for line in lines:
            if not line:
                blank += 1
                continue
            if out:
                out.extend([""] * (blank + 1))  # n line breaks in the value: n empty lines between the texts
            out.extend(_wrap(line, width))
            blank = 0
    body = newline.join(indent + line if line else "" for line in out)
    return f"{style}{chomp}{comment}{newline}{body}"


# -- where things are in the block --------------------------------------------------------------------------------
def _locate_block(text: str) -> tuple[int, int, str] | None:
    """(offset of the YAML block in `text`, offset just past the closing line, the block), as the parser splits
    it; None when the text opens with no block."""
    start = 1 if text.startswith("\ufeff") else 0
    lines = text[start:].splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return None
    offset = start + len(lines[0])
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in _CLOSE:
            block = "".join(lines[1:i])
            return offset, offset + len(block) + len(lines[i]), block
    raise FrontmatterError("frontmatter block is not closed (no later '---' line)")


def _newline_of(block: str) -> str:
    return "\r\n" if "\r\n" in block else "\n"


def _line_end(text: str, at: int) -> int:
    """The index of the line break ending the line that holds `at` (or the end of the text)."""
    found = [i for i in (text.find("\r", at), text.find("\n", at)) if i != -1]
    return min(found) if found else len(text)


def _line_start(text: str, at: int) -> int:
    return max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1


def _break_after(text: str, at: int) -> int:
    """`at` (a line end) moved past its line break."""
    if text.startswith("\r\n", at):
        return at + 2
    return at + 1 if at < len(text) else at


def _content_end(block: str, node: yaml.Node) -> int:
    """Where a value's own text ends: without the comments and blank lines a block collection's end mark runs
    over, and without a block scalar's final line breaks."""
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _content_end(block, node.value[-1])
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        key, value = node.value[-1]
        return max(_content_end(block, value), key.end_mark.index)
    stop = node.end_mark.index
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        while stop > node.start_mark.index and block[stop - 1] in "\r\n \t":
            stop -= 1
    return stop


def _after_colon(block: str, key: yaml.Node) -> int:
    return block.index(":", key.end_mark.index) + 1


def _item_texts(block: str, node: yaml.Node) -> dict[str, str]:
    """The source text of each scalar item of a list, by value: an item that stays is written as it was."""
    return {item.value: block[item.start_mark.index:item.end_mark.index] for item in node.value
            if isinstance(item, yaml.ScalarNode) and item.style not in ("|", ">")}


def _pair_texts(block: str, node: yaml.Node) -> dict[tuple[str, str], str]:
    """The source text of each `name: heading` pair of a mapping, by pair: a pair that stays is written as it was."""
    return {(key.value, value.value): block[key.start_mark.index:value.end_mark.index] for key, value in node.value
            if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.ScalarNode)
            and value.style not in ("|", ">") and key.start_mark.line == value.end_mark.line}


@dataclass(frozen=True)
class _Span:
    start: int
    stop: int
    text: str
    order: int  # among spans at one place: a field's place in FIELDS


# -- each field's new text -------------------------------------------------------------------------------------
def _keywords_span(block: str, key: yaml.Node, value: yaml.Node, keywords: tuple[str, ...], newline: str,
                   safe: bool) -> tuple[int, int, str]:
    start, stop = value.start_mark.index, value.end_mark.index
    flow = "[" + ", ".join(_quoted(k) for k in keywords) + "]" if safe else _flow(keywords)
    if isinstance(value, yaml.SequenceNode) and not value.flow_style and value.value:
        # A block list's end mark runs over the comments and blank lines after it: stop at the end of the line
        # holding the last item instead, so what follows the list stays.
        stop = _line_end(block, _content_end(block, value))
        if not keywords or safe:  # "[]" on the list's own line would be a second value: put it after the colon
            return _after_colon(block, key), stop, " " + flow
        indent = " " * value.start_mark.column
        kept = _item_texts(block, value)
        return start, stop, (newline + indent).join(f"- {kept.get(k) or _scalar(k)}" for k in keywords)
    if isinstance(value, yaml.SequenceNode):
        kept = {} if safe else _item_texts(block, value)
        return start, stop, "[" + ", ".join(kept.get(k) or (_quoted(k) if safe else _scalar(k)) for k in keywords) + "]"
    if isinstance(value, yaml.ScalarNode) and start == stop:  # `keywords:` with nothing after it
        at = _after_colon(block, key)
        return at, at, " " + flow
    if isinstance(value, yaml.ScalarNode):
        stop = _content_end(block, value)
        if safe or value.style in ("|", ">") or any(KEYWORD_SEPARATORS.search(k) for k in keywords):
            return start, stop, flow
        if not keywords:
            return start, stop, '""'
        # outside a flow list a plain scalar may hold ", ": keep the string plain when every keyword is
        joined = ", ".join(keywords)
        return start, stop, joined if all(_scalar(k) == k for k in keywords) else _scalar(joined)
    raise FrontmatterError("`keywords` is a mapping; expected a list or a comma-separated string")


def _scalar_span(block: str, key: yaml.Node, value: yaml.Node, text: str, newline: str,
                 safe: bool) -> tuple[int, int, str]:
    start = value.start_mark.index
    if isinstance(value, yaml.ScalarNode) and start == value.end_mark.index:  # `title:` with nothing after it
        at = _after_colon(block, key)
        return at, at, " " + (_quoted(text) if safe else _block_plain(text) or _quoted(text))
    if not isinstance(value, yaml.ScalarNode):  # a list or mapping where text belongs: replace it whole
        stop = _line_end(block, _content_end(block, value)) if not getattr(value, "flow_style", True) else \
            value.end_mark.index
        return _after_colon(block, key), stop, " " + (_quoted(text) if safe else _block_plain(text) or _quoted(text))
    stop = _content_end(block, value)
    written: str | None = None
    if not safe and "\n" not in text:
        if value.style is None:
            written = _block_plain(text)
        elif value.style == "'":
            written = _single_quoted(text)
    if not safe and written is None and value.style in ("|", ">"):
        header_end = _line_end(block, start)
        header = block[start:header_end]
        parts = _BLOCK_HEADER.match(header)
        chomp = (parts.group(2) or parts.group(4)) if parts else ""
        comment = header[parts.end():] if parts else ""
        content = [line for line in block[header_end:stop].splitlines() if line.strip()]
        column = min((len(line) - len(line.lstrip(" ")) for line in content), default=0)
        indent = " " * (column or key.start_mark.column + 2)
        width = max([len(line) - column for line in content] + [40])
        written = _block_scalar(text, value.style, chomp or "", indent, newline, width, comment.rstrip())
    return start, stop, written if written is not None else _quoted(text)


def _sections_span(block: str, key: yaml.Node, value: yaml.Node, sections: tuple[tuple[str, str], ...],
                   newline: str, safe: bool) -> tuple[int, int, str]:
    if not sections:  # emptied: the key goes, with its value and the line break after it
        stop = _line_end(block, max(_content_end(block, value), key.end_mark.index))
        return _line_start(block, key.start_mark.index), _break_after(block, stop), ""
    kept = _pair_texts(block, value) if isinstance(value, yaml.MappingNode) and not safe else {}
    if isinstance(value, yaml.MappingNode) and value.flow_style and not safe:
        return value.start_mark.index, value.end_mark.index, "{" + ", ".join(
            kept.get(pair) or f"{_scalar(pair[0])}: {_scalar(pair[1])}" for pair in sections) + "}"
    if isinstance(value, yaml.MappingNode) and value.value:
        indent = " " * value.start_mark.column
        stop = _line_end(block, _content_end(block, value))
        if not value.flow_style:
            return value.start_mark.index, stop, (newline + indent).join(
                kept.get(pair) or _mapping_line(*pair, safe) for pair in sections)
    stop = _content_end(block, value)
    if not isinstance(value, yaml.ScalarNode) or value.style in ("|", ">"):
        stop = _line_end(block, stop) if not getattr(value, "flow_style", False) else value.end_mark.index
    indent = newline + " " * (key.start_mark.column + 2)
    return _after_colon(block, key), stop, "".join(indent + _mapping_line(n, h, safe) for n, h in sections)


def _field_lines(field: str, value: Any, newline: str, safe: bool) -> str:
    """A whole `field: value` entry (no final line break) for a key the block lacks."""
    if field == "keywords":
        return "keywords: " + ("[" + ", ".join(_quoted(k) for k in value) + "]" if safe else _flow(value))
    if field == "sections":
        return "sections:" + "".join(f"{newline}  {_mapping_line(n, h, safe)}" for n, h in value)
    if "\n" in value and not safe:
        written = _block_scalar(value, "|", "", "  ", newline, 0, "")
        if written is not None:
            return f"{field}: {written}"
    return f"{field}: " + (_quoted(value) if safe else _block_plain(value) or _quoted(value))


def _insertion(block: str, pairs: dict[str, tuple[yaml.Node, yaml.Node]], first_key: yaml.Node | None, field: str,
               value: Any, newline: str, safe: bool) -> tuple[int, int, str]:
    """Where a field the block lacks goes: `title` before the first key, `keywords` after `title`, `summary`
    after `keywords` (or `title`), `sections` (and anything with no anchor) at the end of the block."""
    indent = " " * (first_key.start_mark.column if first_key is not None else 0)
    line = _field_lines(field, value, newline, safe).replace(newline, newline + indent)
    anchors = {"keywords": ("title",), "summary": ("keywords", "title")}.get(field, ())
    for anchor in anchors:
        if anchor in pairs:
            key, node = pairs[anchor]
            at = _line_end(block, max(_content_end(block, node), key.end_mark.index))
            return at, at, newline + indent + line
    if field == "title" and first_key is not None:
        at = _line_start(block, first_key.start_mark.index)
        return at, at, indent + line + newline
    at = len(block)
    return at, at, ("" if not block or block.endswith(("\n", "\r")) else newline) + indent + line + newline


# -- the edit --------------------------------------------------------------------------------------------------
def _cleaned(title: object, summary: object, keywords: object, sections: object) -> dict[str, Any]:
    new: dict[str, Any] = {}
    if title is not None:
        new["title"] = clean_title(title)
    if keywords is not None:
        new["keywords"] = clean_keywords(keywords)  # type: ignore[arg-type]
    if summary is not None:
        new["summary"] = clean_summary(summary)
    if sections is not None:
        new["sections"] = clean_sections(sections)  # type: ignore[arg-type]
    return new


def _expected(before: Frontmatter | None, new: dict[str, Any]) -> tuple:
    """What the parser must read from the result: the edited fields' new values, everything else as before."""
    base = before or Frontmatter(title="", keywords=(), summary="")
    extra = dict(base.extra)
    title, keywords = new.get("title", base.title), new.get("keywords", base.keywords)
    if "sections" in new:
        extra.pop("sections", None)
        if new["sections"]:
            extra["sections"] = dict(new["sections"])
    summary = base.summary
    if "summary" in new:
        description = extra.get("description")
        summary = new["summary"] or (description.strip() if isinstance(description, str) else "")
    return title, keywords, summary, base.category, extra, list((extra.get("sections") or {}).items()) if \
        isinstance(extra.get("sections"), dict) else extra.get("sections")


def _read_back(fm: Frontmatter) -> tuple:
    sections = fm.extra.get("sections")
    return fm.title, fm.keywords, fm.summary, fm.category, fm.extra, list(sections.items()) if \
        isinstance(sections, dict) else sections


def _rewrite(text: str, located: tuple[int, int, str] | None, new: dict[str, Any],
             safe: bool) -> str:
    if located is None:  # no block yet: one with the edited fields, before the body
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        body = text[len(bom):]
        first = body.splitlines(keepends=True)[:1]
        newline = "\r\n" if first and first[0].endswith("\r\n") else "\n"
        lines = [_field_lines(f, new[f], newline, safe) for f in FIELDS if f in new and new[f]]
        return bom + "---" + newline + "".join(line + newline for line in lines) + "---" + newline + body
    offset, _end, block = located
    newline = _newline_of(block) if ("\n" in block or "\r" in block) else _newline_of(text[:offset])
    root = yaml.compose(block, Loader=yaml.SafeLoader) if block.strip() else None
    if root is not None and not isinstance(root, yaml.MappingNode):  # pragma: no cover - the parser refused it
        raise FrontmatterError("frontmatter must be a YAML mapping")
    pairs: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for key, value in root.value if root is not None else ():
        if isinstance(key, yaml.ScalarNode):
            pairs[key.value] = (key, value)  # the last of a repeated key is the one that counts
    first_key = root.value[0][0] if root is not None and root.value else None
    spans = []
    for order, field in enumerate(FIELDS):
        if field not in new:
            continue
        value = new[field]
        if field not in pairs:
            if field in ("keywords", "sections") and not value:
                continue  # nothing to add
            start, stop, written = _insertion(block, pairs, first_key, field, value, newline, safe)
        elif field == "keywords":
            start, stop, written = _keywords_span(block, *pairs[field], value, newline, safe)
        elif field == "sections":
            start, stop, written = _sections_span(block, *pairs[field], value, newline, safe)
        else:
            start, stop, written = _scalar_span(block, *pairs[field], value, newline, safe)
        spans.append(_Span(start, stop, written, order))
    spans.sort(key=lambda s: (s.start, s.order))
    pieces, at = [], 0
    for span in spans:
        if span.start < at:  # pragma: no cover - fields never overlap in a valid mapping
            raise FrontmatterError("the edited fields overlap in the frontmatter; edit the file by hand")
        pieces += [block[at:span.start], span.text]
        at = span.stop
    pieces.append(block[at:])
    return text[:offset] + "".join(pieces) + text[offset + len(block):]


def edit_frontmatter(text: str, *, title: str | None = None, summary: str | None = None,
                     keywords: Sequence[str] | None = None,
                     sections: Mapping[str, str] | Sequence[tuple[str, str]] | None = None) -> str:
    """`text` with the given frontmatter fields set (None: leave that field alone), every other byte as it was.
    `sections` emptied removes the key. Raises `FrontmatterError` when the block is unusable, a value cannot be
    stored as given (a line break in a title, a control character), or the rewrite would change anything else."""
    new = _cleaned(title, summary, keywords, sections)
    located = _locate_block(text)
    before = None if located is not None and _blank_yaml(located[2]) else _parsed(text)
    if located is None and not any(new.values()):
        return text  # nothing to write, and no block to write it in
    expected = _expected(before, new)
    names = ", ".join(new)
    problem = "it would change other fields"
    for safe in (False, True):
        result = _rewrite(text, located, new, safe)
        try:
            after = parse_frontmatter_strict(result)
        except FrontmatterError as exc:
            problem = str(exc)
            continue
        if after is not None and _read_back(after) == expected and split_body(result) == split_body(text):
            return result
    raise FrontmatterError(f"could not rewrite the {names} without changing other fields ({problem}); edit the "
                           "file by hand")


def _blank_yaml(block: str) -> bool:
    """A block holding only comments and blank lines: an empty mapping to the editor."""
    try:
        return yaml.compose(block, Loader=yaml.SafeLoader) is None
    except yaml.YAMLError:
        return False  # the parser reports it


def _parsed(text: str) -> Frontmatter | None:
    try:
        return parse_frontmatter_strict(text)
    except FrontmatterError as exc:
        raise FrontmatterError(f"the frontmatter cannot be edited in place ({exc}); fix the file by hand") from exc


def replace_keywords(text: str, keywords: Sequence[str]) -> str:
    """`text` with its frontmatter `keywords` set to `keywords` (`edit_frontmatter(text, keywords=...)`)."""
    return edit_frontmatter(text, keywords=keywords)


def frontmatter_span(text: str) -> tuple[int, int]:
    """(start, stop) of the frontmatter block in `text`, its `---` lines included; (0, 0) without one."""
    try:
        located = _locate_block(text)
    except FrontmatterError:
        return 0, 0
    if located is None:
        return 0, 0
    start = 1 if text.startswith("\ufeff") else 0
    return start, located[1]

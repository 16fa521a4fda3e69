"""Markdown + YAML frontmatter -> `Frontmatter` (as the spec defines it).

Pure and tolerant: `parse_frontmatter` never raises for any `str`. Anything that is not a well-formed
frontmatter block returns `None` and logs one WARN naming the source, so the document can still be
uploaded and reached through L1 (as the spec asks).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from kb_core.errors import FrontmatterError
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

MAX_BLOCK_BYTES = 64 * 1024
_HEAD_CHARS = MAX_BLOCK_BYTES + 8 * 1024  # room for any block within the limit and its two delimiter lines
KEYWORD_SEPARATORS = re.compile(r"[,，、;；]")
_OPEN = "---"
_CLOSE = ("---", "...")
_KNOWN_KEYS = frozenset({"title", "keywords", "summary", "category"})


@dataclass(frozen=True)
class Frontmatter:
    title: str
    keywords: tuple[str, ...]
    summary: str
    category: str | None = None
    # Every other key as loaded (e.g. `sections`, or `description`); scalars stay source text.
    extra: dict[str, Any] = field(default_factory=dict)
    # `sections:` as (curator's name, heading line) pairs in the order written; the usable entries only (see
    # `section_problems`). Derived from `extra`, so the stored metadata needs nothing new.
    sections: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; this is what the metadata column stores (JSON text, as the spec decides)."""
        return {
            "title": self.title,
            "keywords": list(self.keywords),
            "summary": self.summary,
            "category": self.category,
            "extra": self.extra,
        }


@dataclass(frozen=True)
class _Split:
    block: str  # the YAML between the delimiters
    body: str  # everything after the closing delimiter line


def _split(content: str) -> _Split | None:
    """Locate the frontmatter block. The first line must be `---`; the next `---`/`...` line closes it.

    Only the head that can hold an acceptable block is split into lines (a 5 MB body is sliced, not split);
    the whole text only when no closing line is found there (a block that is unclosed or too large)."""
    text = content[1:] if content.startswith("\ufeff") else content
    head = text[:_HEAD_CHARS]
    lines = head.splitlines(keepends=True)
    if len(head) < len(text):
        lines = lines[:-1]  # the last line may be cut; the fallback below reads it whole
    if not lines or lines[0].rstrip("\r\n").rstrip() != _OPEN:
        if lines or not text.startswith(_OPEN):
            return None
        lines = text.splitlines(keepends=True)  # a first line longer than the head: `---` and blanks?
        if lines[0].rstrip("\r\n").rstrip() != _OPEN:
            return None
    offset = len(lines[0])
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in _CLOSE:
            return _Split(block="".join(lines[1:i]), body=text[offset + len(lines[i]) :])
        offset += len(lines[i])
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in _CLOSE:
            return _Split(block="".join(lines[1:i]), body="".join(lines[i + 1 :]))
    raise FrontmatterError("frontmatter block is not closed (no later '---' line)")


def has_frontmatter(content: str) -> bool:
    """True when the content opens with a closed `---` block (whether or not its YAML is valid)."""
    try:
        return _split(content) is not None
    except FrontmatterError:
        return False
    except Exception:  # noqa: BLE001 - never raise for any str
        return False


def split_body(content: str) -> str:
    """The Markdown body with any frontmatter block removed (the chunker's input)."""
    try:
        split = _split(content)
    except Exception:  # noqa: BLE001 - an unclosed block is body text
        split = None
    if split is None:
        return content[1:] if content.startswith("\ufeff") else content
    return split.body


class _SourceTextLoader(yaml.SafeLoader):
    """SafeLoader that keeps every scalar as its source text and refuses aliases (pure-Python fallback).

    No implicit resolvers: `2.0` stays "2.0", `1.10` stays "1.10", `yes` stays "yes", dates stay strings.
    Aliases are refused outright: an alias bomb ("billion laughs") is tiny as YAML but explodes when the
    metadata is serialised, and real frontmatter has no need for them.
    """

    yaml_implicit_resolvers: dict = {}

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise FrontmatterError(f"YAML aliases are not allowed in frontmatter (line {event.start_mark.line + 1})")
        return super().compose_node(parent, index)


if getattr(yaml, "__with_libyaml__", False):

    class _FastSourceTextLoader(yaml.CSafeLoader):  # type: ignore[name-defined,misc]
        """The same rules on libyaml's C parser (~10x faster: the L0 scan parses every document at start-up).
        Its composer is C, so aliases are caught afterwards by `_refuse_shared_containers`."""

        yaml_implicit_resolvers: dict = {}

    _LOADER: type = _FastSourceTextLoader
else:  # pragma: no cover - PyYAML wheels ship libyaml
    _LOADER = _SourceTextLoader


def _refuse_anchors_and_aliases(block: str) -> None:
    """Any anchor (`&a`) or alias (`*a`) is refused before anything is built: a scalar alias bomb
    (`pad: &a "<30 KB>"`, `bomb: [*a, *a, …]`) is small as YAML and huge as JSON. Real frontmatter has no
    need for either. Only blocks that contain `&` or `*` pay for the event scan."""
    if "&" not in block and "*" not in block:
        return
    try:
        for event in yaml.parse(block, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                line = event.start_mark.line + 2 if event.start_mark is not None else "?"
                what = "an alias" if isinstance(event, yaml.AliasEvent) else "an anchor"
                raise FrontmatterError(f"YAML anchors and aliases are not allowed in frontmatter ({what} at line "
                                       f"{line})")
    except yaml.YAMLError:
        return  # the real load below reports the syntax error with its position


def _refuse_shared_containers(data: Any) -> None:
    """An alias to a list or mapping loads as the *same* object twice; that is how alias bombs look."""
    seen: set[int] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                raise FrontmatterError("YAML aliases are not allowed in frontmatter")
            seen.add(id(node))
            stack.extend(node.values() if isinstance(node, dict) else node)


# -- the common shape, without YAML ---------------------------------------------------------------------
# Nearly every block is a few top-level `key: value` lines, a keyword list in flow (`[a, b]`) or block (`- a`)
# style and quoted scalars; YAML (even libyaml's) costs most of a document's parse for them at start-up.
# `_load_simple` reads exactly that shape and returns what the loader returns (every scalar its source text);
# for anything else (a character that is not plainly text, a comment, an anchor, a tag, a nested mapping, a
# multi-line scalar, an escape, a duplicate key ...) it returns None and YAML reads the block as before.
# tests/unit/test_scan_frontmatter_fast.py holds it equal to the loader on golden and generated blocks.
_NOT_SIMPLE = re.compile(r"[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]|[#&*]")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]{0,199}):(?: +(.*))?")  # (YAML: a simple key is < 1024 chars)
_ITEM_LINE = re.compile(r"( *)- +(.*)")
_PLAIN_START = frozenset("-?:,[]{}#&*!|>'\"%@`")
_FLOW_ITEM_BAD = re.compile(r"[\[\]{}:'\"]")


def _simple_scalar(value: str) -> str | None:
    """The scalar that a one-line value (no leading or trailing spaces, not empty) loads as, or None when it is
    not a plain or simply quoted one."""
    first = value[0]
    if first == "'":
        if len(value) < 2 or value[-1] != "'":
            return None
        inner = value[1:-1]
        if "'" in inner.replace("''", ""):
            return None
        return inner.replace("''", "'")
    if first == '"':
        if len(value) < 2 or value[-1] != '"':
            return None
        inner = value[1:-1]
        return None if '"' in inner or "\\" in inner else inner
    if first in _PLAIN_START or ": " in value or value[-1] == ":":
        return None
    return value


def _flow_list(value: str) -> list[str] | None:
    inner = value[1:-1]
    if not inner.strip(" "):
        return []
    items = []
    for raw in inner.split(","):
        item = raw.strip(" ")
        if not item or item[0] in _PLAIN_START or _FLOW_ITEM_BAD.search(item) is not None:
            return None
        items.append(item)
    return items


def _load_simple(block: str) -> dict[str, Any] | None:
    if "\r" in block:
        block = block.replace("\r\n", "\n")
        if "\r" in block:
            return None
    if _NOT_SIMPLE.search(block) is not None:
        return None
    data: dict[str, Any] = {}
    listing: list[str] | None = None  # the block list being read (after a `key:` line with no value)
    listing_key = ""
    indent = -1  # its items' indent
    for line in block.split("\n"):
        if not line.strip(" "):
            continue
        if line[0] == " " or line[0] == "-":
            item = _ITEM_LINE.fullmatch(line)
            if item is None or listing is None or (indent >= 0 and len(item.group(1)) != indent):
                return None
            indent = len(item.group(1))
            value = item.group(2).rstrip(" ")
            scalar = _simple_scalar(value) if value else None
            if scalar is None:
                return None
            if not listing:
                data[listing_key] = listing
            listing.append(scalar)
            continue
        key_line = _KEY_LINE.fullmatch(line)
        if key_line is None:
            return None
        key = key_line.group(1)
        if key in data:
            return None
        value = (key_line.group(2) or "").rstrip(" ")
        listing = None
        listing_key = ""
        if not value:
            data[key] = ""
            listing, listing_key, indent = [], key, -1
            continue
        if value[0] == "[":
            if value[-1] != "]":
                return None
            loaded: Any = _flow_list(value)
        else:
            loaded = _simple_scalar(value)
        if loaded is None:
            return None
        data[key] = loaded
    return data or None


def _load_yaml(block: str) -> Any:
    if len(block.encode("utf-8", "surrogatepass")) > MAX_BLOCK_BYTES:
        raise FrontmatterError(f"frontmatter block is larger than {MAX_BLOCK_BYTES // 1024} KiB")
    simple = _load_simple(block)
    if simple is not None:
        return simple
    _refuse_anchors_and_aliases(block)
    try:
        data = yaml.load(block, Loader=_LOADER)  # noqa: S506 - SafeLoader subclasses
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 2}" if mark is not None else ""  # +1 for 1-based, +1 for the '---' line
        raise FrontmatterError(f"invalid YAML{where}: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML: {exc}") from exc
    _refuse_shared_containers(data)
    return data


def _json_safe(value: Any) -> Any:
    """Explicit tags (`!!binary`, `!!set`, `!!timestamp`, `!!float .nan`) load as non-JSON values; the
    metadata column stores JSON, so those become their text."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _keywords(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raw = KEYWORD_SEPARATORS.split(value)
    elif isinstance(value, list):
        raw = [item for item in value if isinstance(item, str)]
    else:
        raw = []
    seen: set[str] = set()
    kept: list[str] = []
    for item in raw:
        keyword = item.strip()
        key = normalize_term(keyword)
        if not key or key in seen:
            continue
        seen.add(key)
        kept.append(keyword)
    return tuple(kept)


def parse_sections(value: Any) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """`sections:` -> ((name, heading line), ...) and what was wrong with it. Tolerant: a bad value or entry is
    left out and reported (upload lint shows it), never a reason to refuse the document."""
    if value is None:
        return (), ()
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else type(value).__name__
        return (), (f"`sections` must be a mapping of name: heading line, got {kind}; it is ignored",)
    pairs: list[tuple[str, str]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for name, heading in value.items():
        label = str(name).strip()
        if not isinstance(heading, str) or not heading.strip():
            problems.append(f"section “{label}”: the heading must be a non-empty string (e.g. \"## 1. Timeouts\")")
        elif not label:
            problems.append(f"a section name is empty (heading {heading.strip()!r})")
        elif normalize_term(label) in seen:
            problems.append(f"section “{label}” is named twice; the first one is kept")
        else:
            seen.add(normalize_term(label))
            pairs.append((label, heading.strip()))
    return tuple(pairs), tuple(problems)


def parse_frontmatter_strict(content: str) -> Frontmatter | None:
    """Like `parse_frontmatter` but raises `FrontmatterError` with the reason; `None` means no block at all.

    The console's upload lint uses this to show the parser's reason to the curator.
    """
    split = _split(content)
    if split is None:
        return None
    data = _load_yaml(split.block)
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise FrontmatterError(f"frontmatter must be a YAML mapping, got {kind}")
    summary = data.get("summary")
    if summary is None or summary == "":
        summary = data.get("description")
    category = _text(data.get("category")) or None
    extra = {str(k): _json_safe(v) for k, v in data.items() if k not in _KNOWN_KEYS}
    return Frontmatter(
        title=_text(data.get("title")),
        keywords=_keywords(data.get("keywords")),
        summary=_text(summary),
        category=category,
        extra=extra,
        sections=parse_sections(extra.get("sections"))[0],
    )


def parse_frontmatter(content: str, *, source: str | None = None) -> Frontmatter | None:
    """Parse the frontmatter of a Markdown document; `None` when it has none or it is unusable."""
    where = f" in {source}" if source else ""
    try:
        parsed = parse_frontmatter_strict(content)
    except FrontmatterError as exc:
        log.warning("ignoring frontmatter%s: %s", where, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - never raise for any str (RecursionError, reader errors, ...)
        log.warning("ignoring frontmatter%s: %s: %s", where, type(exc).__name__, exc)
        return None
    if parsed is None:
        log.warning("no frontmatter%s", where)
    return parsed

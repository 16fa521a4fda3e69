"""Rewrite one document's frontmatter `keywords` in its file text, every other byte as it was.

The keyword map fixes a clash in place: the curator edits a document's keywords and the console writes the
file back. A YAML round trip (load, change, dump) would reorder keys, drop comments, re-quote scalars and
re-wrap the summary, so a one-keyword fix would show up as a rewrite of the whole block in `git diff`. Here
PyYAML only *locates* the `keywords` value (node marks); the new value replaces exactly that span, in the
style it had (block list with the same indent, flow list, or a comma-separated string). Comments inside the
old value go with it; comments, key order, line endings and the body around it stay byte for byte.

Pure: text in, text out. The result is parsed again and refused unless it yields exactly the new keywords
and the same title, summary, category and other fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import yaml

from kb_core.documents.frontmatter import KEYWORD_SEPARATORS, parse_frontmatter_strict
from kb_core.errors import FrontmatterError
from kb_core.terms import normalize_term

_CLOSE = ("---", "...")
# A plain YAML scalar that every YAML reader reads back as the same string: starts with a letter, digit or
# CJK character, no indicator or separator characters, and not a word YAML 1.1 readers turn into a bool/null.
_PLAIN = re.compile(r"^[^\s\-?:,\[\]{}#&*!|>'\"%@`][^:#,\[\]{}\n\r\t'\"]*(?<!\s)$")
_YAML_WORDS = frozenset("y n yes no on off true false null ~".split())
_NUMBER = re.compile(r"^[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?$|^0[xob]|^\.(inf|nan)$", re.IGNORECASE)


def clean_keywords(keywords: Sequence[str]) -> tuple[str, ...]:
    """The keywords as they will be written: trimmed, blank and repeated (after normalisation) ones dropped.
    A keyword spanning lines is refused: YAML would fold it and L0 would never match it as typed."""
    kept: list[str] = []
    seen: set[str] = set()
    for keyword in keywords:
        if not isinstance(keyword, str):
            raise FrontmatterError(f"a keyword must be text, not {type(keyword).__name__}")
        keyword = keyword.strip()
        if any(ch in keyword for ch in "\r\n\x00"):
            raise FrontmatterError(f"keyword {keyword!r} spans lines: one keyword per line")
        term = normalize_term(keyword)
        if term and term not in seen:
            seen.add(term)
            kept.append(keyword)
    return tuple(kept)


def _scalar(keyword: str) -> str:
    folded = keyword.casefold()
    if _PLAIN.match(keyword) and folded not in _YAML_WORDS and not _NUMBER.match(keyword):
        return keyword
    return json.dumps(keyword, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _flow(keywords: Sequence[str]) -> str:
    return "[" + ", ".join(_scalar(k) for k in keywords) + "]"


def _locate_block(text: str) -> tuple[int, str]:
    """(offset of the YAML block in `text`, the block), as the parser splits it."""
    start = 1 if text.startswith("\ufeff") else 0
    lines = text[start:].splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        raise FrontmatterError("the document has no frontmatter block to hold keywords")
    offset = start + len(lines[0])
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in _CLOSE:
            return offset, "".join(lines[1:i])
    raise FrontmatterError("frontmatter block is not closed (no later '---' line)")


def _newline_of(block: str) -> str:
    return "\r\n" if "\r\n" in block else "\n"


def _line_end(text: str, at: int) -> int:
    """The index of the line break ending the line that holds `at` (or the end of the text)."""
    found = [i for i in (text.find("\r", at), text.find("\n", at)) if i != -1]
    return min(found) if found else len(text)


def _replacement(block: str, key: yaml.Node, value: yaml.Node, keywords: tuple[str, ...]) -> tuple[int, int, str]:
    """(start, stop, new text) inside the block for the value of `keywords`."""
    start, stop = value.start_mark.index, value.end_mark.index
    if isinstance(value, yaml.SequenceNode) and not value.flow_style and value.value:
        # A block list's end mark runs over the comments and blank lines after it: stop at the end of the line
        # holding the last item instead, so what follows the list stays.
        stop = _line_end(block, value.value[-1].end_mark.index)
        if not keywords:  # "[]" on the list's own line would be a second value: put it after the colon
            colon = block.index(":", key.end_mark.index)
            return colon + 1, stop, " []"
        indent = " " * value.start_mark.column
        newline = _newline_of(block)
        return start, stop, (newline + indent).join(f"- {_scalar(k)}" for k in keywords)
    if isinstance(value, yaml.SequenceNode):
        return start, stop, _flow(keywords)
    if isinstance(value, yaml.ScalarNode) and start == stop:  # `keywords:` with nothing after it
        colon = block.index(":", key.end_mark.index)
        return colon + 1, colon + 1, " " + _flow(keywords)
    if isinstance(value, yaml.ScalarNode):
        while stop > start and block[stop - 1] in "\r\n \t":  # a block scalar's mark includes its final break
            stop -= 1
        if value.style in ("|", ">") or any(KEYWORD_SEPARATORS.search(k) for k in keywords):
            return start, stop, _flow(keywords)
        if not keywords:
            return start, stop, '""'
        # outside a flow list a plain scalar may hold ", ": keep the string plain when every keyword is
        joined = ", ".join(keywords)
        return start, stop, joined if all(_scalar(k) == k for k in keywords) else _scalar(joined)
    raise FrontmatterError("`keywords` is a mapping; expected a list or a comma-separated string")


def _insertion(block: str, root: yaml.MappingNode, keywords: tuple[str, ...]) -> tuple[int, int, str]:
    """Where a missing `keywords` key goes: on the line after `title`, else at the end of the block."""
    newline = _newline_of(block)
    line = f"keywords: {_flow(keywords)}"
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "title":
            at = _line_end(block, value.end_mark.index if value.end_mark.index > key.end_mark.index
                           else key.end_mark.index)
            return at, at, newline + line
    at = len(block)
    return at, at, ("" if not block or block.endswith(("\n", "\r")) else newline) + line + newline


def replace_keywords(text: str, keywords: Sequence[str]) -> str:
    """`text` with its frontmatter `keywords` set to `keywords`; raises `FrontmatterError` when the document
    has no usable frontmatter or the rewrite would change anything else."""
    new = clean_keywords(keywords)
    before = parse_frontmatter_strict(text)
    if before is None:
        raise FrontmatterError("the document has no frontmatter block to hold keywords")
    offset, block = _locate_block(text)
    try:
        root = yaml.compose(block, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:  # pragma: no cover - parse_frontmatter_strict above refused it already
        raise FrontmatterError(f"invalid YAML: {exc}") from exc
    if not isinstance(root, yaml.MappingNode):
        raise FrontmatterError("frontmatter must be a YAML mapping")
    pairs = [(k, v) for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "keywords"]
    start, stop, replacement = _replacement(block, *pairs[-1], new) if pairs else _insertion(block, root, new)
    result = text[: offset + start] + replacement + text[offset + stop:]
    after = parse_frontmatter_strict(result)
    if after is None or after.keywords != new or (after.title, after.summary, after.category, after.extra) != (
            before.title, before.summary, before.category, before.extra):
        raise FrontmatterError("could not rewrite the keywords without changing other fields; edit the file "
                               "by hand")
    return result

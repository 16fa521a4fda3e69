"""Markdown body -> chunks with their heading path. Pure.

Split at headings first (ATX and setext, found by `sections.find_headings`; a heading never lands in the
middle of a chunk), then by size: sections longer than `max_chars` are cut at paragraph, line or sentence
boundaries with some overlap. Fenced code blocks are kept whole when they fit, and a heading-looking line
inside a fence is not a heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_core.documents.cleaning import clean_body
from kb_core.documents.frontmatter import split_body
from kb_core.documents.sections import find_headings, may_have_headings

# The heading of the chunk that restates a document's frontmatter (title, summary, keywords) for search:
# L1 recognises it, and answers with that document's body instead of repeating its metadata.
FRONTMATTER_HEADING = "(frontmatter)"
DEFAULT_MAX_CHARS = 800
DEFAULT_OVERLAP = 100

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_SENTENCE_END = re.compile(r"(?<=[。！？.!?；;])\s*")


@dataclass(frozen=True)
class Chunk:
    chunk_no: int
    heading_path: tuple[str, ...]
    text: str

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    def embedding_text(self, title: str) -> str:
        """What the embedder (and BM25) sees: title + heading path + chunk text."""
        path = self.heading_path[1:] if self.heading_path[:1] == (title,) else self.heading_path  # H1 == title
        head = " > ".join(p for p in (title, *path) if p)
        return f"{head}\n\n{self.text}" if head else self.text


@dataclass(frozen=True)
class _Block:
    """A unit the size splitter must not cut: a paragraph, or a whole fenced code block."""

    text: str
    is_code: bool


def _sections(body: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """[(heading path, lines)] in document order; text before the first heading has an empty path."""
    sections: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    stack: list[tuple[int, str]] = []
    lines = body.splitlines()
    headings = {h.line: h for h in find_headings(lines)} if may_have_headings(body) else {}
    i = 0
    while i < len(lines):
        heading = headings.get(i)
        if heading is None:
            sections[-1][1].append(lines[i])
            i += 1
            continue
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.raw))
        sections.append((tuple(title for _, title in stack), []))
        i = heading.end
    return sections


def _blocks(lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    current: list[str] = []
    fence: str | None = None

    def flush(is_code: bool = False) -> None:
        text = "\n".join(current).strip("\n")
        if text.strip():
            blocks.append(_Block(text, is_code))
        current.clear()

    for line in lines:
        fence_match = _FENCE.match(line)
        if fence is not None:
            current.append(line)
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
                flush(is_code=True)
            continue
        if fence_match:
            flush()
            fence = fence_match.group(1)
            current.append(line)
            continue
        if not line.strip():
            flush()
            continue
        current.append(line)
    flush(is_code=fence is not None)
    return blocks


def _hard_split(text: str, max_chars: int) -> list[str]:
    """Cut an oversized block at line, then sentence boundaries, and as a last resort every max_chars."""
    pieces: list[str] = []
    for unit in _units(text, max_chars):
        if pieces and len(pieces[-1]) + 1 + len(unit) <= max_chars:
            pieces[-1] = pieces[-1] + ("\n" if "\n" in text else "") + unit
        else:
            pieces.append(unit)
    return pieces


def _units(text: str, max_chars: int) -> list[str]:
    units: list[str] = []
    for line in text.split("\n"):
        if len(line) <= max_chars:
            units.append(line)
            continue
        for sentence in (s for s in _SENTENCE_END.split(line) if s):
            while len(sentence) > max_chars:
                units.append(sentence[:max_chars])
                sentence = sentence[max_chars:]
            if sentence:
                units.append(sentence)
    return units


def _tail(text: str, overlap: int) -> str:
    """The last ~`overlap` characters, starting at a word/sentence boundary when there is one."""
    if overlap <= 0 or len(text) <= overlap:
        return ""
    tail = text[-overlap:]
    cut = max(tail.find(" "), tail.find("\n"), tail.find("。"))
    return tail[cut + 1 :].strip() if 0 <= cut < len(tail) - 1 else tail.strip()


def _pack(blocks: list[_Block], max_chars: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for block in blocks:
        parts = [block.text] if len(block.text) <= max_chars else _hard_split(block.text, max_chars)
        for part in parts:
            if not current:
                current = part
            elif len(current) + 2 + len(part) <= max_chars:
                current = f"{current}\n\n{part}"
            else:
                chunks.append(current)
                carry = "" if block.is_code else _tail(current, overlap)
                current = f"{carry}\n\n{part}" if carry and len(carry) + 2 + len(part) <= max_chars else part
    if current:
        chunks.append(current)
    return chunks


def chunk_markdown(
    content: str, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = DEFAULT_OVERLAP
) -> list[Chunk]:
    """Chunks of a whole Markdown document (frontmatter and boilerplate removed, see `cleaning`)."""
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    body = clean_body(split_body(content))
    chunks: list[Chunk] = []
    for path, lines in _sections(body):
        for text in _pack(_blocks(lines), max_chars, min(overlap, max_chars // 2)):
            chunks.append(Chunk(len(chunks), path, text))
    return chunks

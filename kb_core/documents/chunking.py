"""Markdown body -> chunks with their heading path. Pure.

Split at headings first (ATX and setext, found by `sections.scan_headings`; a heading never lands in the
middle of a chunk), then by size: sections longer than `max_chars` are cut at paragraph, line or sentence
boundaries with some overlap. Fenced code blocks are kept whole when they fit, and a heading-looking line
inside a fence is not a heading.

Linear in the document's size, with Python work per chunk rather than per line: the heading scan is bounded
(`sections.MAX_HEADINGS`: after that many headings the rest of a document is text of the last section, cut by
size), paragraphs and fences are found by regex over a section's text, and a paragraph whose lines all fit is
cut at line ends with `str.rfind`. A heading longer than `sections.MAX_HEADING_CHARS` names its chunks by its
start, and its whole line stays in the text.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from kb_core.documents.cleaning import clean_body, needs_cleaning, plain_lines
from kb_core.documents.frontmatter import split_body
from kb_core.documents.sections import scan_headings

# The heading of the chunk that restates a document's frontmatter (title, summary, keywords) for search:
# L1 recognises it, and answers with that document's body instead of repeating its metadata.
FRONTMATTER_HEADING = "(frontmatter)"
# What cleaning and chunking make of a file, as a number stored with each indexed document: bump it when either
# changes what is indexed, and the next opening re-indexes the documents of an older version as a reconcile job
# (their files did not change, so nothing else would). None (a row from before the number): 1. 2: MDX/JSX
# component lines cleaned away. 3: components whose tags run over several lines (`<Tabs` then its
# attributes, `values={[…]}>`), or hold a `>` in an attribute, and imports over several lines.
CONTENT_VERSION = 3
DEFAULT_MAX_CHARS = 800
DEFAULT_OVERLAP = 100
# What L1 indexes of one document. Indexing costs about as much per character as tokenising it twice (jieba for
# the full-text index, Milvus' analyzer): a 5 MB document would take tens of seconds, and its 200,000 headings
# as many rows. Beyond either cap the rest of a document is reached through L0 (its keywords) and its sections.
MAX_CHUNKS = 1000
MAX_INDEXED_CHARS = 500_000

_FENCE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_FENCE_AFTER = re.compile(r"\n[ \t]{0,3}(`{3,}|~{3,})")  # "\n" first: the regex engine jumps between lines
_SENTENCE_END = re.compile(r"(?<=[。！？.!?；;])\s*")
_BLANK_RUN = re.compile(r"\n{3,}")
# Blank lines (only white space) between paragraphs, each with the line break before it.
_BLANK_LINES = re.compile(r"\n(?:[^\S\n]*\n)+")
_patterns: dict[tuple[str, int], re.Pattern[str]] = {}


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


def _sections(body: str) -> tuple[list[tuple[tuple[str, ...], str]], bool]:
    """[(heading path, text)] in document order (text before the first heading has an empty path), and whether
    the heading scan read every heading."""
    text = plain_lines(body)
    scan = scan_headings(text)
    sections: list[tuple[tuple[str, ...], str]] = []
    path: tuple[str, ...] = ()
    kept = ""  # the whole text of a heading cut at MAX_HEADING_CHARS, which stays in its section
    stack: list[tuple[int, str]] = []
    position = 0
    for heading in scan.headings:
        sections.append((path, kept + text[position : heading.offset]))
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.raw))
        path = tuple(title for _, title in stack)
        kept = text[heading.offset : heading.stop] if heading.cut else ""
        position = heading.stop
    sections.append((path, kept + text[position:]))
    return sections, scan.complete


def _blocks(text: str) -> list[_Block]:
    """The paragraphs and fenced code blocks of a section's text, in order (blank lines separate paragraphs; a
    fence runs to the line that repeats its character at least as often, or to the end)."""
    blocks: list[_Block] = []
    fenced = "```" in text or "~~~" in text
    position = 0
    while True:
        fence = _next_fence(text, position) if fenced else None
        prose_end = len(text) if fence is None else fence[0]
        blocks.extend(_Block(p.strip("\n"), False) for p in _BLANK_LINES.split(f"\n{text[position:prose_end]}\n")
                      if p.strip("\n"))
        if fence is None:
            return blocks
        start, opened, line_end = fence
        close = None if line_end < 0 else _pattern("close", opened[0], len(opened)).search(text, line_end)
        if close is None:
            code = text[start:].strip("\n")
            if code.strip():
                blocks.append(_Block(code, True))
            return blocks
        position = text.find("\n", close.end())
        position = len(text) if position < 0 else position
        blocks.append(_Block(text[start:position], True))


def _next_fence(text: str, position: int) -> tuple[int, str, int] | None:
    """(where the next line opening a fence starts, its fence, where that line ends or -1), from `position` (0
    or a line break)."""
    found = _FENCE.match(text) if position == 0 else None
    start = 0
    if found is None:
        found = _FENCE_AFTER.search(text, position)
        if found is None:
            return None
        start = found.start() + 1
    return start, found.group(1), text.find("\n", found.end())


def _pattern(kind: str, char: str, n: int) -> re.Pattern[str]:
    key = (kind + char, n)
    pattern = _patterns.get(key)
    if pattern is None:
        if kind == "close":  # a line that closes a fence of n `char`s
            pattern = re.compile(rf"\n[ \t]{{0,3}}{re.escape(char)}{{{n},}}")
        else:  # a line longer than n characters
            pattern = re.compile(rf"^[^\n]{{{n + 1}}}", re.MULTILINE)
        if len(_patterns) < 256:
            _patterns[key] = pattern
    return pattern


def _hard_split(text: str, max_chars: int) -> list[str]:
    """Cut an oversized block at line, then sentence boundaries, and as a last resort every max_chars: as many
    units (lines, or sentences of a line that does not fit) as fit into each piece, in order."""
    if "\n" in text and _pattern("long", "", max_chars).search(text) is None:
        return _cut_at_lines(text, max_chars)
    units = _units(text, max_chars)
    joint = "\n" if "\n" in text else ""
    # A unit joins the piece before it when the piece, one more character and the unit fit: with prefix sums
    # of the units' lengths (plus the joint's), each piece is one bisection instead of a step per unit.
    ends = [0, *itertools.accumulate(map(len, units))] if not joint else \
        [0, *itertools.accumulate(n + 1 for n in map(len, units))]
    pieces: list[str] = []
    first = 0
    while first < len(units):
        reach = ends[first] + max_chars + (1 if joint else -1)
        last = max(first + 1, bisect.bisect_right(ends, reach) - 1)
        pieces.append(joint.join(units[first:last]))
        first = last
    return pieces


def _cut_at_lines(text: str, max_chars: int) -> list[str]:
    """`_hard_split` of a block whose lines all fit: as many whole lines as fit into each piece."""
    pieces: list[str] = []
    position = 0
    while len(text) - position > max_chars:
        cut = text.rfind("\n", position, position + max_chars + 1)
        pieces.append(text[position:cut])
        position = cut + 1
    pieces.append(text[position:])
    return pieces


def _units(text: str, max_chars: int) -> list[str]:
    """The lines of `text`, each line longer than `max_chars` replaced by its sentences (cut every max_chars
    when still too long). The short lines between long ones are taken in slices, the sentences by one split."""
    units: list[str] = []
    position = 0
    for line in _pattern("long", "", max_chars).finditer(text):
        if line.start() > position:
            units.extend(text[position : line.start() - 1].split("\n"))
        end = text.find("\n", line.start())
        end = len(text) if end < 0 else end
        sentences = list(filter(None, _SENTENCE_END.split(text[line.start() : end])))
        if sentences and max(map(len, sentences)) > max_chars:
            for sentence in sentences:
                units.extend(sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars))
        else:
            units.extend(sentences)
        position = end + 1
    if position <= len(text):
        units.extend(text[position:].split("\n"))
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


@dataclass(frozen=True)
class Chunking:
    chunks: list[Chunk]
    complete: bool  # False: the document is longer than L1 indexes (MAX_CHUNKS, MAX_INDEXED_CHARS)
    indexed_chars: int  # the characters of chunk text
    all_headings: bool = True  # False: more headings than `sections.scan_headings` reads (later ones are text)


def chunk_markdown(
    content: str, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = DEFAULT_OVERLAP
) -> list[Chunk]:
    """Chunks of a whole Markdown document (frontmatter and boilerplate removed, see `cleaning`); at most
    MAX_CHUNKS of them and MAX_INDEXED_CHARS characters, from the start (`chunk_document` says whether that is
    all of it)."""
    return chunk_document(content, max_chars=max_chars, overlap=overlap).chunks


def chunk_document(content: str, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = DEFAULT_OVERLAP,
                   max_chunks: int = MAX_CHUNKS, max_indexed_chars: int = MAX_INDEXED_CHARS) -> Chunking:
    """`chunk_markdown`, and whether the chunks hold the whole document. Chunking stops at the caps, so a long
    document costs no more than its first MAX_INDEXED_CHARS characters (and one scan of its headings)."""
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    body = plain_lines(split_body(content))
    # without boilerplate, cleaning would only tidy blank lines (and runs of them inside code blocks)
    if needs_cleaning(body):
        body = clean_body(body)
    elif "\n\n\n" in body:
        body = _BLANK_RUN.sub("\n\n", body)
    chunks: list[Chunk] = []
    indexed = 0
    sections, all_headings = _sections(body)
    for path, section in sections:
        for text in _pack(_blocks(section), max_chars, min(overlap, max_chars // 2)):
            if len(chunks) >= max_chunks or indexed >= max_indexed_chars:
                return Chunking(chunks, False, indexed, all_headings)
            chunks.append(Chunk(len(chunks), path, text))
            indexed += len(text)
    return Chunking(chunks, True, indexed, all_headings)

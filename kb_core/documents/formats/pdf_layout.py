"""A PDF's lines as Markdown blocks: headings, list items, code, paragraphs. Pure (no PDF library here):
`from_pdf` reads each page's lines, tables and images with pypdfium2 and hands them over as `PageItems`.

Headings come from the document's outline (bookmarks) when it has one: a line that spells an outline entry of
its page becomes a heading of the entry's depth, and an entry no line spells is put at the top of its page.
Without an outline they come from font sizes: the body size is the one most text is set in, and short lines
set clearly larger (at most four sizes, largest first) or wholly bold are headings. Running headers and footers
(the same line at the top or bottom of most pages, page numbers counted alike) are page chrome and left out.
Lines set in a fixed-pitch font are code. Lines join into a paragraph while the gap between them stays a line's
height; CJK text joins without a space, and a line ending in a hyphen keeps it (`proxy-` + `rewrite`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kb_core.documents.formats import markdown_out as md


@dataclass(frozen=True)
class Line:
    text: str
    x: float  # where its first character starts, in points from the left
    y: float  # its baseline, in points from the bottom of the page
    size: float  # the font size of its first character
    bold: bool  # its first and last characters are bold
    mono: bool  # set in a fixed-pitch font


@dataclass(frozen=True)
class Placed:
    """A block that is already Markdown (a table, an image placeholder) and the height of its top."""

    top: float
    markdown: str


@dataclass(frozen=True)
class PageItems:
    lines: tuple[Line, ...]
    placed: tuple[Placed, ...]  # tables and images, each put before the first line below its top


@dataclass(frozen=True)
class Outline:
    """The outline entries of each page: (depth from 1, title)."""

    entries: dict[int, tuple[tuple[int, str], ...]]


@dataclass(frozen=True)
class Style:
    body: float  # the body text's size
    heading_sizes: tuple[float, ...]  # largest first; index + 1 is the level


_BULLET = re.compile(r"^[•◦▪▫●○■□‣⁃∙·\-–—*]\s+(?=\S)")
_NUMBERED = re.compile(r"^(\d{1,3})[.)]\s+(?=\S)")
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")
_SENTENCE_END = re.compile(r"[.;:,!?。；：，！？]$")
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?$|^[ivxlc]{1,6}$", re.IGNORECASE)
MAX_HEADING_WORDS = 14
MAX_HEADING_CHARS = 120


def style_of(pages: Sequence[PageItems]) -> Style:
    """The body size (most characters) and the larger sizes short lines are set in (headings)."""
    weight: Counter[float] = Counter()
    for page in pages:
        for line in page.lines:
            weight[round(line.size * 2) / 2] += len(line.text)
    if not weight:
        return Style(0.0, ())
    body = weight.most_common(1)[0][0]
    larger = {round(line.size * 2) / 2 for page in pages for line in page.lines
              if line.size >= body * 1.15 and _short(line.text)}
    return Style(body, tuple(sorted(larger, reverse=True)[:4]))


def _short(text: str) -> bool:
    return len(text) <= MAX_HEADING_CHARS and len(text.split()) <= MAX_HEADING_WORDS


def _key(text: str, *, numbered: bool = False) -> str:
    """A line as compared across pages: no spaces; with `numbered`, no page number (`iii`, `12`, `Page 3 of 9`)
    at either end either."""
    words = text.lower().split()
    while numbered and words and _PAGE_NUMBER.match(words[0]):
        words = words[1:]
    while numbered and words and _PAGE_NUMBER.match(words[-1]):
        words = words[:-1]
    return "".join(words)


def _edges(page: PageItems) -> list[Line]:
    """The two lines nearest the top and the two nearest the bottom: where running headers and footers sit."""
    ordered = sorted(page.lines, key=lambda line: -line.y)
    return ordered[:2] + ordered[-2:]


@dataclass(frozen=True)
class Running:
    """Running headers and footers: lines at the page's edges repeated on most pages, as they are (`same`) or
    but for a page number (`numbered`: only lines no larger than the body text, since "Chapter 3" headings
    differ by a number too)."""

    same: frozenset[str] = frozenset()
    numbered: frozenset[str] = frozenset()

    def holds(self, line: Line, body: float) -> bool:
        if _PAGE_NUMBER.match(line.text.strip()) or _key(line.text) in self.same:
            return True
        return line.size <= body * 1.05 and _key(line.text, numbered=True) in self.numbered


def running_lines(pages: Sequence[PageItems]) -> Running:
    if len(pages) < 3:
        return Running()
    same: Counter[str] = Counter()
    numbered: Counter[str] = Counter()
    for page in pages:
        same.update({_key(line.text) for line in _edges(page)})
        numbered.update({_key(line.text, numbered=True) for line in _edges(page)})
    least = max(3, len(pages) // 2)
    return Running(frozenset(k for k, n in same.items() if k and n >= least),
                   frozenset(k for k, n in numbered.items() if k and n >= least))


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _heading_level(line: Line, style: Style) -> int | None:
    text = line.text.strip()
    if not _short(text) or not any(ch.isalpha() for ch in text):
        return None
    size = round(line.size * 2) / 2
    if size in style.heading_sizes:
        return style.heading_sizes.index(size) + 1
    if line.bold and size >= style.body and not _SENTENCE_END.search(text) and len(text.split()) <= 10:
        return min(len(style.heading_sizes) + 1, md.MAX_HEADING)
    return None


def join_lines(first: str, second: str) -> str:
    """Two lines of one paragraph as one: no space between CJK characters or after a hyphen."""
    if not first:
        return second
    if (_CJK.match(first[-1]) and second and _CJK.match(second[0])) or (first.endswith("-") and second[:1].islower()):
        return first + second
    return f"{first} {second}"


class _PageWriter:
    """The blocks of one page; `blocks` runs it."""

    def __init__(self, page: PageItems, style: Style, headings: tuple[tuple[int, str], ...], running: Running,
                 outline: bool):
        self.page = page
        self.style = style
        self.running = running
        self.entries = headings
        self.headings = {_norm(title): depth for depth, title in headings}
        self.matched: set[str] = set()
        self.outline = outline  # the document has an outline: font sizes make no headings
        self.out: list[str] = []
        self.para: list[Line] = []
        self.code: list[Line] = []
        self.in_list = False  # the last block is a list: the next item joins it

    def blocks(self) -> list[str]:
        placed = sorted(self.page.placed, key=lambda p: -p.top)
        chrome = {id(line) for line in _edges(self.page) if self.running.holds(line, self.style.body)}
        for line in self.page.lines:
            while placed and placed[0].top >= line.y:
                self._emit(placed.pop(0).markdown)
            if id(line) not in chrome:
                self._line(line)
        for item in placed:
            self._emit(item.markdown)
        self._flush()
        missing = [md.heading(depth, title) for depth, title in self.entries if _norm(title) not in self.matched]
        return missing + self.out

    def _emit(self, block: str) -> None:
        self._flush()
        if block:
            self.out.append(block)
            self.in_list = False

    def _flush(self) -> None:
        if self.code:
            left = min(line.x for line in self.code)
            width = max(self.code[0].size * 0.6, 1.0)
            text = "\n".join(" " * max(0, round((line.x - left) / width)) + line.text.rstrip() for line in self.code)
            self.code = []
            self.out.append(md.code_block(text))
            self.in_list = False
        if self.para:
            block, item = _paragraph_block(self.para)
            if item and self.in_list:
                self.out[-1] += "\n" + block
            else:
                self.out.append(block)
            self.in_list = item
            self.para = []

    def _line(self, line: Line) -> None:
        text = line.text.strip()
        if not text:
            return
        level = self._outline_level(text) if self.outline else _heading_level(line, self.style)
        if level is not None:
            self._emit(md.heading(level, text))
            return
        if line.mono:
            if self.para:
                self._flush()
            self.code.append(line)
            return
        if self.code:
            self._flush()
        if self.para and not self._continues(self.para[-1], line):
            self._flush()
        self.para.append(line)

    def _outline_level(self, text: str) -> int | None:
        key = _norm(text)
        if key in self.headings and key not in self.matched:
            self.matched.add(key)
            return self.headings[key]
        return None

    def _continues(self, previous: Line, line: Line) -> bool:
        """`line` goes on the paragraph `previous` ended: no list item starts, the gap is a line's height."""
        if _BULLET.match(line.text) or _NUMBERED.match(line.text):
            return False
        gap = previous.y - line.y
        return 0 < gap <= max(previous.size, line.size) * 1.7 and abs(previous.size - line.size) < 1.0


def _paragraph_block(lines: list[Line]) -> tuple[str, bool]:
    """A paragraph, or a list item with its continuation lines (True)."""
    text = ""
    for line in lines:
        text = join_lines(text, line.text.strip())
    bullet, numbered = _BULLET.match(text), _NUMBERED.match(text)
    if bullet:
        return md.list_item(text[bullet.end():]), True
    if numbered:
        return md.list_item(text[numbered.end():], number=int(numbered.group(1))), True
    return md.paragraph(text), False


def page_blocks(page: PageItems, style: Style, outline: Outline, index: int, running: Running) -> list[str]:
    """The Markdown blocks of page `index`."""
    entries = outline.entries.get(index, ())
    return _PageWriter(page, style, entries, running, bool(outline.entries)).blocks()

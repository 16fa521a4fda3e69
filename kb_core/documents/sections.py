"""Headings and sections of a Markdown body: what `availableSections` lists and `section_title` serves. Pure.

One heading scanner for the whole project (the chunker uses it too): ATX headings outside fenced code
(``` and ~~~ fences of any length, indented up to 3 spaces), setext headings (a paragraph underlined with
`===` or `---`; a `---` after a blank line is a rule, not a heading), closing `#`s stripped. Section names are
read as rendered: inline markup (code spans, emphasis, links, HTML tags and entities, backslash escapes) is
removed, so an agent can type what it sees. Heading attributes and anchors (`描述 {#description}`) are removed
with the rest of the boilerplate before headings are read (`cleaning`); a `section_title` an agent copied with
the old anchor still matches.

Sections are headings `#`-`###`, each named by its heading path ("Attributes > upstream"). A lone leading H1
is the document's title: when other headings follow, it is not listed and not part of their paths.
"""

from __future__ import annotations

import bisect
import html
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kb_core.documents.cleaning import clean_body, clean_heading, needs_cleaning, plain_lines
from kb_core.documents.frontmatter import split_body

MAX_LISTED = 50
MORE = "…"
SEPARATOR = " > "
SECTION_LEVELS = 3
# Bounds for legal but heavy input (a 5 MB document can hold 250,000 headings): the scan reads a document's
# first MAX_HEADINGS headings and looks at no more than MAX_SCANNED_LINES lines that could be one (`#` lines,
# fences, `===`/`---`); what follows is text of the last section read (and is chunked by size). A heading's text
# is read up to MAX_HEADING_CHARS characters. So building an L0 entry, the upload lint and serving a section do
# work bounded by these numbers, plus a few passes over the text at the speed of `str` methods and regexes.
MAX_HEADINGS = 2000
MAX_SCANNED_LINES = 10 * MAX_HEADINGS
MAX_HEADING_CHARS = 300
MAX_NAMED = 200  # frontmatter `sections` entries used (the rest are reported by the upload lint)
MAX_AMBIGUOUS = 20  # sections named in an "ambiguous: …" note
# The longest `section_title` read: a path of three headings of MAX_HEADING_CHARS, or a curator's name
MAX_TITLE_CHARS = 1000

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
# The text is taken whole and trimmed in Python (`_heading_raw`): a lazy `(.*?)[ \t]*$` or a searched
# `[ \t]+#+$` retries at every space, and a hostile heading of 100,000 spaces took minutes.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# A line that cannot be (the start of) a setext heading's paragraph: list items, quotes, tables, HTML blocks.
_NOT_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}(?:[-+*][ \t]|\d{1,9}[.)][ \t]|>|\||<))")
# Only these lines can change the scanner's state: an ATX opener, a fence, a setext underline. The leading "\n"
# (not "^") lets the regex engine jump from newline to newline instead of trying every character.
_INTERESTING = re.compile(r"\n[ \t]{0,3}(?:#{1,6}(?:[ \t]|$)|`{3}|~{3}|=+[ \t]*$|-+[ \t]*$)", re.MULTILINE)
# In "\n"-prefixed text: the last newline of a range that a blank line follows. Matched from the range's start,
# `.*` runs to its end and backs up in C to the nearest blank line: a long paragraph costs no Python loop.
_LAST_BLANK = re.compile(r".*\n(?=[^\S\n]*\n)", re.DOTALL)
_closing_fences: dict[str, re.Pattern[str]] = {}


@dataclass(frozen=True)
class Heading:
    line: int  # first line of the heading (a setext heading starts at its paragraph)
    end: int  # the line after the heading (after the underline for setext)
    level: int
    raw: str  # as written, closing #s removed (at most MAX_HEADING_CHARS characters)
    text: str  # as rendered
    offset: int = -1  # where its first line starts in the scanned text (`"\n".join(lines)`)
    stop: int = -1  # where the line after it starts
    cut: bool = False  # its text was longer than MAX_HEADING_CHARS: `raw` and `text` hold the start of it


@dataclass(frozen=True)
class HeadingScan:
    headings: list[Heading]
    complete: bool  # False: the scan stopped at MAX_HEADINGS or MAX_SCANNED_LINES; later headings are text
    chars: int  # length of the scanned text
    lines: int  # its lines, counted as `str.splitlines` does
    looked: int = 0  # lines looked at one by one (at most MAX_SCANNED_LINES)


_new = object.__new__


def _heading(line: int, end: int, level: int, raw: str, text: str, offset: int, stop: int, cut: bool) -> Heading:
    """`Heading(...)` without the frozen dataclass's `__init__` (one `object.__setattr__` a field): the scan
    makes one for every heading of every document at start-up. The same value (fields, equality, hash)."""
    heading = _new(Heading)
    heading.__dict__.update(line=line, end=end, level=level, raw=raw, text=text, offset=offset, stop=stop, cut=cut)
    return heading


def find_headings(lines: Sequence[str]) -> list[Heading]:
    """Every ATX (levels 1-6) and setext heading outside fenced code, in document order (the first
    MAX_HEADINGS of them, see `scan_headings`)."""
    return scan_headings("\n".join(lines)).headings


def scan_headings(text: str, *, limit: int = MAX_HEADINGS, budget: int = MAX_SCANNED_LINES) -> HeadingScan:
    """The headings of `text` (lines separated by "\n" only: see `cleaning.plain_lines`), at most `limit` of them.

    Only lines that can change something (`#`, fences, `===`/`---`) are looked at one by one, at most
    `budget` of them: the index scan runs this over every document at start-up, and most lines are prose. A
    fenced code block is skipped in one regex search for its closing fence, and the paragraph of a setext
    heading is found by a regex too, so a document's size costs C-speed passes and only the lines looked at
    cost Python work."""
    t = "\n" + text  # a line starts after each "\n" of t; offsets in t are one more than in text
    headings: list[Heading] = []
    boundary = 0  # where in t the last line that closed a block (heading, fence, rule) ends: a paragraph follows
    line_no, counted, position, looked = -1, 0, 0, 0
    complete = True
    while True:
        candidate = _INTERESTING.search(t, position)
        if candidate is None:
            break
        if len(headings) >= limit or looked >= budget:
            complete = False
            break
        looked += 1
        start = candidate.start() + 1
        line_no += t.count("\n", counted, start)
        counted = start
        end = t.find("\n", start)
        end = len(t) if end < 0 else end
        line = t[start:end]
        position = end
        fence = _FENCE.match(line)
        if fence is not None:
            closing = _closing_fence(fence.group(1)).search(t, end)
            if closing is None:  # the fence runs to the end of the document
                break
            position = boundary = closing.end()
            line_no += t.count("\n", counted, closing.start() + 1)
            counted = closing.start() + 1
            continue
        atx = _ATX.match(line)
        if atx is not None:
            boundary = end
            raw = _heading_raw(atx.group(2))
            if raw:
                raw, cut = _cut(raw)
                headings.append(_heading(line_no, line_no + 1, len(atx.group(1)), raw, render_inline(raw),
                                        start - 1, min(end, len(text)), cut))
            continue
        setext = _SETEXT.match(line)
        if setext is not None:
            first = _paragraph_start(t, boundary, start)
            # a list, quote, table or HTML block runs until a blank line: underlining it makes no heading
            if first < start and not _NOT_PARAGRAPH.match(t[first : t.find("\n", first)]):
                paragraph = t[first : start - 1]
                raw = " ".join(part.strip() for part in paragraph[: 4 * MAX_HEADING_CHARS].split("\n"))
                raw, cut = _cut(raw)
                cut = cut or len(paragraph) > 4 * MAX_HEADING_CHARS
                headings.append(_heading(line_no - t.count("\n", first, start), line_no + 1,
                                        1 if setext.group(1)[0] == "=" else 2, raw, render_inline(raw), first - 1,
                                        min(end, len(text)), cut))
            boundary = end
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return HeadingScan(headings, complete, len(text), lines, looked)


def _closing_fence(fence: str) -> re.Pattern[str]:
    """The line that closes a fence opened by `fence`: the same character at least as often, then nothing."""
    pattern = _closing_fences.get(fence)
    if pattern is None:
        pattern = re.compile(rf"\n[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[^\S\n]*$", re.MULTILINE)
        if len(_closing_fences) < 64:
            _closing_fences[fence] = pattern
    return pattern


def _paragraph_start(t: str, boundary: int, start: int) -> int:
    """Where in t the paragraph ends that a setext underline starting at `start` would underline: after the
    last blank line since `boundary` (the end of the last block), or right after `boundary`. `start` itself
    when the line before the underline is blank or a block's end."""
    if start - 1 <= boundary:
        return start
    blank = _LAST_BLANK.match(t, boundary, start)
    if blank is None:
        return boundary + 1
    return t.index("\n", blank.end()) + 1


def _cut(raw: str) -> tuple[str, bool]:
    if len(raw) <= MAX_HEADING_CHARS:
        return raw, False
    return raw[:MAX_HEADING_CHARS].rstrip(), True


def _heading_raw(text: str | None) -> str:
    """An ATX heading's text without the surrounding blanks and the closing `#`s (`Title ##` -> `Title`; the
    `#` of `C#` is text)."""
    text = (text or "").strip()
    unclosed = text.rstrip("#")
    if len(unclosed) < len(text) and (not unclosed or unclosed[-1] in " \t"):
        return unclosed.strip()
    return text


def _blank(line: str) -> bool:
    return not line or line.isspace()


def may_have_headings(text: str) -> bool:
    """False when no line could be a heading: skips the line scan for plain bodies."""
    return _INTERESTING.search("\n" + text) is not None


# -- rendering ----------------------------------------------------------------------------------------------
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")  # the rule `_code_spans` follows (the reference in tests)
_TICKS = re.compile(r"`+")
_ESCAPE = re.compile(r"\\([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])?")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>", re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS_STAR = re.compile(r"\*(?=\S)(.+?)(?<=\S)\*")
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![\w])_(?=\S)(.+?)(?<=\S)_(?![\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_SPACES = re.compile(r"\s+")
_MARKUP = re.compile(r"[`\\\[<&*_~]")
_ESCAPED_BASE = 0xF0000  # a private-use plane: escaped characters wait there while markup is removed


def render_inline(text: str) -> str:
    """Heading text as a reader sees it: `` `limit_req` `` -> limit_req, `[A](u)` -> A, `&amp;` -> &."""
    if _MARKUP.search(text) is None:
        return " ".join(text.split())
    out: list[str] = []
    position = 0
    for start, end, inner_start, inner_end in _code_spans(text):
        out.append(_render_plain(text[position:start]))
        code = text[inner_start:inner_end]
        out.append(code.strip() or code)
        position = end
    out.append(_render_plain(text[position:]))
    return _SPACES.sub(" ", "".join(out)).strip()


def _code_spans(text: str) -> list[tuple[int, int, int, int]]:
    """(start, end, content start, content end) of each code span, as `_CODE_SPAN.finditer` finds them, in time
    linear in the backticks (the regex backtracks cubically: 300 backticks took 0.2 s, 2,000 a minute).

    An opening run of n backticks pairs with the first later run of exactly k backticks on its line, for the
    largest k <= n that has one (the n - k others belong to the content); matching goes on after the closer."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    by_length: dict[int, list[int]] = {}  # run length -> indexes of the runs of that length, ascending
    for i, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(i)
    spans: list[tuple[int, int, int, int]] = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        closer = None
        for k in range(end - start, 0, -1):
            same = by_length.get(k)
            if same is None:
                continue
            at = bisect.bisect_right(same, i)
            if at < len(same) and runs[same[at]][0] < line_end:
                closer = k, same[at]
                break
        if closer is None:
            i += 1
            continue
        k, j = closer
        spans.append((start, runs[j][1], start + k, runs[j][0]))
        i = j + 1
    return spans


def _render_plain(text: str) -> str:
    text = _ESCAPE.sub(lambda m: chr(_ESCAPED_BASE + ord(m.group(1))), text)
    text = _IMAGE_OR_LINK.sub(lambda m: m.group(1), text)
    text = _AUTOLINK.sub(lambda m: m.group(1), text)
    text = _TAG.sub("", text)
    for pattern in (_STRONG, _STRIKE):
        text = pattern.sub(lambda m: m.group(m.lastindex), text)
    text = _EMPHASIS_STAR.sub(lambda m: m.group(1), text)
    text = _EMPHASIS_UNDERSCORE.sub(lambda m: m.group(1), text)
    text = html.unescape(text)
    return "".join(chr(ord(c) - _ESCAPED_BASE) if ord(c) >= _ESCAPED_BASE + 32 and ord(c) < _ESCAPED_BASE + 128
                   else c for c in text)


def heading_line_text(heading_line: str) -> str:
    """`"## 1. 超时类错误"` (a frontmatter `sections` value) -> `"1. 超时类错误"`, rendered and without heading
    attributes (`"## 描述 {#description}"` -> `"描述"`)."""
    atx = _ATX.match(heading_line.strip())
    raw = _heading_raw(atx.group(2)) if atx else heading_line.strip()
    return render_inline(clean_heading(raw))


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


# -- sections -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]
    heading: Heading
    end: int  # the line after its last sub-section
    listed: bool = True  # False for the title H1, which is matched but not listed
    stop: int = -1  # where it ends in the scanned text: the offset of line `end`

    @property
    def title(self) -> str:
        return SEPARATOR.join(self.path)


def _section(path: tuple[str, ...], heading: Heading, end: int, listed: bool, stop: int) -> Section:
    """`Section(...)` as `_heading` makes a `Heading`."""
    section = _new(Section)
    section.__dict__.update(path=path, heading=heading, end=end, listed=listed, stop=stop)
    return section


def document_sections(lines: Sequence[str], headings: Sequence[Heading] | None = None) -> list[Section]:
    """The `#`-`###` sections of a body's lines, each with its path and extent. Repeated paths get " (2)"."""
    found = find_headings(lines) if headings is None else headings
    return _sections(found, len(lines), sum(map(len, lines)) + max(len(lines) - 1, 0))


def text_sections(scan: HeadingScan) -> list[Section]:
    """`document_sections` of a scanned text (`scan_headings`): `section_in(text, section)` is its text."""
    return _sections(scan.headings, scan.lines, scan.chars)


def _sections(headings: Sequence[Heading], lines: int, chars: int) -> list[Section]:
    found = [h for h in headings if h.level <= SECTION_LEVELS]
    h1 = [h for h in found if h.level == 1]
    title = found[0] if len(found) > 1 and len(h1) == 1 and found[0] is h1[0] else None
    ends = _ends(found, lines, chars)
    sections: list[Section] = []
    stack: list[tuple[int, tuple[str, ...]]] = []  # (level, path) of the open parents
    seen: dict[tuple[str, ...], int] = {}
    for heading, (end, stop) in zip(found, ends, strict=True):
        if heading is title:
            sections.append(_section((heading.text,), heading, end, False, stop))
            continue
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        path = (*stack[-1][1], heading.text) if stack else (heading.text,)
        count = seen[path] = seen.get(path, 0) + 1
        if count > 1:
            path = (*path[:-1], f"{heading.text} ({count})")
        stack.append((heading.level, path))
        sections.append(_section(path, heading, end, True, stop))
    return sections


def _ends(headings: Sequence[Heading], lines: int, chars: int) -> list[tuple[int, int]]:
    """Where each heading's section ends (line, offset): at the next heading of the same or a higher level (one
    pass)."""
    ends = [(lines, chars)] * len(headings)
    open_: list[int] = []  # indexes of headings whose section is still open, levels increasing
    for i, heading in enumerate(headings):
        while open_ and headings[open_[-1]].level >= heading.level:
            ends[open_.pop()] = (heading.line, heading.offset)
        open_.append(i)
    return ends


def named_sections(sections: Sequence[Section], mapping: Mapping[str, str]) -> tuple[list[tuple[str, Section]],
                                                                                     list[str]]:
    """([(curator's name, its section)], names whose heading is not in the body). A heading line matches a
    section's heading text (or path); among equal texts the one at the written level wins, then the first."""
    by_key: dict[str, list[Section]] = {}  # each section under its heading text and its path, normalised
    for section in sections if mapping else ():
        for key in dict.fromkeys((normalize(section.heading.text), normalize(section.title))):
            by_key.setdefault(key, []).append(section)
    found: list[tuple[str, Section]] = []
    missing: list[str] = []
    for name, line in mapping.items():
        wanted = normalize(heading_line_text(line))
        level = len(line.strip()) - len(line.strip().lstrip("#"))
        candidates = by_key.get(wanted, []) if wanted else []
        at_level = [s for s in candidates if s.heading.level == level]
        chosen = (at_level or candidates or [None])[0]
        if chosen is None:
            missing.append(name)
        else:
            found.append((name, chosen))
    return found, missing


def listed_sections(sections: Sequence[Section], names: Sequence[tuple[str, Section]] = (), *,
                    complete: bool = True) -> tuple[str, ...] | None:
    """`availableSections`: the curator's names when there are any, else the heading paths in document order;
    at most 50 and then "…" (also when the heading scan stopped early: `complete=False`); None without headings."""
    listed = [name for name, _ in names] or [s.title for s in sections if s.listed]
    if not listed:
        return None
    more = len(listed) > MAX_LISTED or (not complete and not names)
    return tuple(listed[:MAX_LISTED]) + ((MORE,) if more else ())


CHIPS = 12  # about a dozen section chips fit above an answer; the rest wait behind "more"
CHIPS_SLACK = 2  # a "more" holding one or two chips takes the room they would: show them instead


@dataclass(frozen=True)
class SectionChips:
    """Which of `availableSections` a console shows as chips at once, and which behind "more"."""

    shown: tuple[str, ...]  # in document order
    more: tuple[str, ...]  # in document order
    truncated: bool  # the list ended in "…": later headings are not listed but can be typed


def section_chips(available: Sequence[str] | None, chosen: Sequence[str | None] = (), limit: int = CHIPS
                  ) -> SectionChips:
    """Top-level sections first, then one level deeper and so on, until `limit` chips; every chip in `chosen`
    (the section just served, the title just asked) is shown as well. A list that fits within `limit` plus
    a little slack is shown whole."""
    names = [name for name in available or () if name != MORE]
    truncated = len(names) < len(available or ())
    if len(names) <= limit + CHIPS_SLACK:
        return SectionChips(tuple(names), (), truncated)
    by_depth = sorted(range(len(names)), key=lambda i: (names[i].count(SEPARATOR), i))
    keep = set(by_depth[:limit]) | {i for i, name in enumerate(names) if name in chosen}
    return SectionChips(tuple(n for i, n in enumerate(names) if i in keep),
                        tuple(n for i, n in enumerate(names) if i not in keep), truncated)


@dataclass(frozen=True)
class SectionMatch:
    section: Section | None
    note: str | None  # why nothing was served ("no section 'X'; available: …", "ambiguous: …")


def match_section(sections: Sequence[Section], title: str, names: Sequence[tuple[str, str]] = (),
                  available: Sequence[str] | None = None) -> SectionMatch:
    """NFKC + casefold on a curator's name, the heading text or the heading path: exact first, then the unique
    section that contains it; a title with markup or heading attributes (`描述 {#description}`, as the section
    was named before its anchor was cleaned away) that matches nothing is tried again as rendered and cleaned.
    `names` are (name, heading path) pairs. A title longer than any section's name can be (MAX_TITLE_CHARS)
    matches nothing and is not read further."""
    if len(title) > MAX_TITLE_CHARS:
        shown = ", ".join(available or ()) or "none"
        return SectionMatch(None, f"no section '{title[:80]}…': a section title has at most {MAX_TITLE_CHARS:,} "
                                  f"characters; available: {shown}")
    keys = _keys(sections, names)
    result = _match(keys, title)
    rendered = render_inline(title)
    cleaned = SEPARATOR.join(clean_heading(part) for part in title.split(SEPARATOR))
    for retry in dict.fromkeys((rendered, cleaned, render_inline(cleaned))):
        if result.section is not None or result.note is not None:
            break
        if retry != title.strip():
            result = _match(keys, retry)
    if result.section is None and result.note is None:
        shown = ", ".join(available or ()) or "none"
        return SectionMatch(None, f"no section '{title}'; available: {shown}")
    return result


def _keys(sections: Sequence[Section], names: Sequence[tuple[str, str]]) -> list[tuple[Section, tuple[str, ...]]]:
    """Each section with what can name it, normalised: the curator's names for it, its heading text, its path
    (computed once per call, not once per try)."""
    own: dict[str, list[str]] = {}
    for name, path in names:
        own.setdefault(path, []).append(normalize(name))
    return [(s, (*own.get(s.title, ()), normalize(s.heading.text), normalize(s.title))) for s in sections]


def _match(keys: Sequence[tuple[Section, tuple[str, ...]]], title: str) -> SectionMatch:
    wanted = normalize(title)
    if not wanted:
        return SectionMatch(None, None)
    exact = _unique([s for s, k in keys if wanted in k])
    if not exact:
        # A path contains every ancestor's name: containment looks at paths only when the title names one.
        contained = _unique([s for s, k in keys if any(wanted in key for key in (k if ">" in wanted else k[:-1]))])
        exact = contained
    if len(exact) == 1:
        return SectionMatch(exact[0], None)
    if exact:
        shown = ", ".join(s.title for s in exact[:MAX_AMBIGUOUS])
        more = f", … ({len(exact) - MAX_AMBIGUOUS} more)" if len(exact) > MAX_AMBIGUOUS else ""
        return SectionMatch(None, f"ambiguous: {shown}{more}")
    return SectionMatch(None, None)


def _unique(sections: list[Section]) -> list[Section]:
    return list({id(s): s for s in sections}.values())


def section_text(lines: Sequence[str], section: Section) -> str:
    """The section as written: its heading, its text and its sub-sections."""
    return "\n".join(lines[section.heading.line : section.end]).strip("\n")


def section_in(text: str, section: Section) -> str:
    """`section_text` of a section of `text_sections`: a slice of the scanned text."""
    return text[section.heading.offset : section.stop].strip("\n")


# -- a whole document ---------------------------------------------------------------------------------------
def body_text(content: str) -> str:
    """The document's body as an answer shows it: frontmatter and boilerplate removed (`cleaning`), "\n" its only
    line break."""
    body = plain_lines(split_body(content))
    return clean_body(body) if needs_cleaning(body) else body


@dataclass(frozen=True)
class Outline:
    """What the L0 entry keeps: computed once at index time, never at lookup time."""

    listed: tuple[str, ...] | None  # `availableSections`
    names: tuple[tuple[str, str], ...] = ()  # (curator's name, heading path) from frontmatter `sections`
    missing: tuple[str, ...] = ()  # curator's names whose heading is not in the body


def outline(content: str, named: Sequence[tuple[str, str]] = ()) -> Outline:
    """The section list of a whole document and where its curator's names point; at most MAX_NAMED names are
    looked up (the upload lint says so for more)."""
    scan = scan_headings(body_text(content))
    if not scan.headings:
        return Outline(None, (), tuple(name for name, _ in named[:MAX_NAMED]))
    sections = text_sections(scan)
    found, missing = named_sections(sections, dict(named[:MAX_NAMED]))
    return Outline(listed_sections(sections, found, complete=scan.complete), tuple((n, s.title) for n, s in found),
                   tuple(missing))


@dataclass(frozen=True)
class ServedSection:
    content: str | None  # None: nothing served (see `note`)
    path: str | None
    note: str | None


def serve_section(content: str, title: str, names: Sequence[tuple[str, str]] = (),
                  available: Sequence[str] | None = None) -> ServedSection:
    """The section of a whole document that `title` names, as written (cleaned like the normal answer). The
    work is bounded like the L0 entry's (`scan_headings`): one read of the text, no line list."""
    text = body_text(content)
    match = match_section(text_sections(scan_headings(text)), title, names, available)
    if match.section is None:
        return ServedSection(None, None, match.note)
    return ServedSection(section_in(text, match.section), match.section.title, None)

"""Boilerplate out of Markdown bodies: what an agent, the chunker, the section list and the console's Content
view should never see. Pure. This module is the one cleaning rule: `primary.content` (`clean_document`),
chunks, sections and `availableSections` (`clean_body`) and section-title matching (`clean_heading`) all use it.

Real documentation opens with licence comments (`<!-- Licensed to the Apache Software Foundation … -->`),
`<head><link rel="canonical" …></head>` blocks and MDX `import`/`export` lines. Left in, they fill the first
2,000 characters of an answer and become the first chunk of every document. Generators also write heading
attributes after a heading's text: Docusaurus ids (`## 描述 {#description}`, `\\{#id\\}` escaped in MDX),
Pandoc / kramdown / markdown-it-attrs attribute lists (`{.class}`, `{#id .class key=value}`, `{-}`) and empty
HTML anchors (`<a name="x"></a>`). The site never renders them; left in, they become part of every section
name an agent is offered. All of it is removed outside fenced code only: inside a code fence every line is
content (a YAML sample may well contain `<!-- -->` or `import`, a Markdown sample `## Title {#id}`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_core.documents.frontmatter import split_body

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_MDX_LINE = re.compile(r"^(?:import\s+[\w*{}\s,]+\s+from\s+['\"][^'\"]+['\"]|import\s+['\"][^'\"]+['\"]|export\s+"
                       r"(?:const|let|var|function|default)\b).*$")
# The first line of an import whose names run over several lines (`import {`, `import Tabs, {`): it ends where
# its braces close (`} from '@theme/Tabs';`).
_MDX_IMPORT_OPEN = re.compile(r"^import\s+(?:[\w$]+\s*,\s*)?\{[^}]*$")
# The start of a component's tag (`<Tabs`, `</TabItem`, `<Foo.Bar`): a tag that runs over several lines, or
# holds a `>` inside an attribute (`values={[{label: 'a > b'}]}`), is read by `_tags_to_line_end`.
_COMPONENT_TAG = re.compile(r"[ \t]*</?[A-Z][\w.]*")
# Lines a component's tag may run over before the cleaner decides it was not one (text that only looked alike).
_MAX_TAG_LINES = 200
# A line that is only MDX/JSX component tags (`<Tabs groupId="os">`, `<TabItem value="linux">`, `</TabItem>`,
# `<Admonition type="note" />`): a component's name starts with a capital letter, an HTML tag's does not (those
# stay: `<br>`, `<details>` are content).
_JSX_LINE = re.compile(r"^[ \t]*(?:</?[A-Z][\w.]*(?:\s[^<>]*)?>[ \t]*)+$")
_HEAD_OPEN = re.compile(r"^\s*<head(\s[^>]*)?>", re.IGNORECASE)
_HEAD_CLOSE = re.compile(r"</head\s*>", re.IGNORECASE)
_BLANK_RUN = re.compile(r"\n{3,}")
_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")

# One attribute of a heading's attribute list: `#id`, `.class`, `key=value` (quoted or not), Pandoc's `-`.
_ATTRIBUTE = r"""(?:#[^\s{}\\]+|\.[^\s{}\\]+|[A-Za-z_][\w:.-]*=(?:"[^"]*"|'[^']*'|[^\s{}\\"']+)|-)"""
# A trailing attribute list (kramdown writes `{: …}`; MDX escapes it as `\{…\}`). `{{#each}}` or `{name}` is
# heading text, not attributes.
# It holds no `{`, so it starts at the last one: matched from there, never searched for (a search would retry
# at every space of a hostile heading).
_ATTRIBUTES = re.compile(rf"\{{:?[ \t]*{_ATTRIBUTE}(?:[ \t]+{_ATTRIBUTE})*[ \t]*\\?\}}[ \t]*")
_EMPTY_ANCHOR = re.compile(r"""<a\s+(?:name|id)\s*=\s*(?:"[^"]*"|'[^']*')\s*(?:/>|>\s*</a\s*>)[ \t]*""",
                           re.IGNORECASE)
_ATX_OPEN = re.compile(r" {0,3}#{1,6}[ \t]+")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
# Probes: can a body hold anything `clean_body` removes? Most bodies hold none, and then need no line scan.
_PROBE_MDX = re.compile(r"^(?:import|export)\s", re.MULTILINE)
_PROBE_HEAD = re.compile(r"<head", re.IGNORECASE)
_PROBE_JSX = re.compile(r"^[ \t]*</?[A-Z]", re.MULTILINE)
# (each starts with a literal, so the regex engine jumps between candidates instead of trying every character)
_PROBE_ATX_ATTRIBUTES = re.compile(r"\n {0,3}#{1,6}[ \t][^\n]*\}[ \t#]*(?:\n|$)")
_PROBE_SETEXT_ATTRIBUTES = re.compile(r"\}[ \t]*\n {0,3}(?:=+|-+)[ \t]*(?:\n|$)")
_PROBE_ANCHOR = re.compile(r"<a\s+(?:name|id)\s*=", re.IGNORECASE)
# Lines that cannot end a setext heading's text: list items, quotes, tables, indented code.
_NOT_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}(?:[-+*][ \t]|\d{1,9}[.)][ \t]|>|\|))")
_HEAD_CLOSE_LINE = re.compile(r"</head[^\S\n]*>", re.IGNORECASE)  # `_HEAD_CLOSE` within one line
_CLOSER = re.compile(r"[\]})]")
# Line breaks other than "\n" (`str.splitlines` splits at each): text with any of them is rejoined with "\n".
_OTHER_BREAKS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_closing_fences: dict[str, re.Pattern[str]] = {}


def clean_heading(text: str) -> str:
    """A heading's text without generator attributes and anchors: `描述 {#description}` -> `描述`,
    `Intro {.lead #top}` -> `Intro`, `<a name="x"></a>Setup` -> `Setup`. Text that only looks alike stays:
    `Use {{#each}}`, `The {name} placeholder`."""
    start = text.rfind("{")
    if start >= 0 and _ATTRIBUTES.fullmatch(text, start):
        text = text[: start - 1 if text[start - 1 : start] == "\\" else start].rstrip(" \t")
    if "<" in text:
        text = _EMPTY_ANCHOR.sub("", text).strip()
    return text


def first_heading(content: str) -> str:
    """The text of a document's first level-1 heading (`# Title`), outside code fences and after the
    frontmatter; "" without one. Docusaurus and MkDocs pages often carry their title only there."""
    fence = ""
    lines = content.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":  # skip the frontmatter block
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)
    for line in lines[start:]:
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif line.startswith("# "):
            return clean_heading(_LINK_TEXT.sub(r"\1", line[2:].strip().rstrip("#").strip()))
    return ""


def needs_cleaning(body: str) -> bool:
    """False when `clean_body` would only tidy blank lines: no comment, `<head>`, MDX line or heading
    attribute. Lets a caller that scans every document skip the line-by-line pass."""
    return "<!--" in body or (("<h" in body or "<H" in body) and _PROBE_HEAD.search(body) is not None) or (
        ("import" in body or "export" in body) and _PROBE_MDX.search(body) is not None) or (
        "}" in body and (_PROBE_ATX_ATTRIBUTES.search("\n" + body) is not None
                         or _PROBE_SETEXT_ATTRIBUTES.search(body) is not None)) or (
        ("<a" in body or "<A" in body) and _PROBE_ANCHOR.search(body) is not None) or (
        "<" in body and _PROBE_JSX.search(body) is not None)


def _clean_atx(line: str) -> str:
    """An ATX heading line without its attributes (closing `#`s go with them); any other line as it is."""
    match = _ATX_OPEN.match(line)
    if match is None:
        return line
    text = line[match.end() :].rstrip(" \t")
    unclosed = text.rstrip("#")
    if len(unclosed) < len(text) and unclosed[-1:] in (" ", "\t"):  # `## Title {#id} ##`: closing #s
        text = unclosed.rstrip(" \t")
    cleaned = clean_heading(text)
    return line if cleaned == text else (match.group(0) + cleaned).rstrip()


def clean_body(body: str) -> str:
    """The body without HTML comments, `<head>` blocks, MDX import/export statements, lines of MDX component tags
    (`<Tabs …>`, `</TabItem>`) and heading attributes, outside code fences.

    Line by line in effect; in time, only the lines that can change something are looked at one by one
    (`_CANDIDATE`: fences, comments, `<head>`, import/export, headings with `{` or `<`, setext underlines), and
    the lines between them are copied as one slice: a 5 MB body of plain headings costs a few regex passes.
    Inside a fence, a comment or a `<head>` block the scan jumps to where it ends."""
    text = plain_lines(body)
    if not text:
        return ""
    # P: the lines of `str.splitlines` behind one "\n" each; a line starts right after a "\n" of P
    p = "\n" + (text[:-1] if text.endswith("\n") else text)
    cleaner = _Cleaner()
    candidates = _Candidates(p)
    out = cleaner.out
    at = 1  # where the next line starts
    tag_began: tuple[int, int, int] | None = None  # a tag running over lines: (its line's start, end, len(out))
    while at <= len(p) or tag_began is not None:
        if tag_began is not None and (at > len(p) or cleaner.tag_lines > _MAX_TAG_LINES):
            # it never closed: not a tag after all; its first line stays, and the lines after it are read again
            line_start, line_end, kept = tag_began
            cleaner.tag_budget -= cleaner.tag_lines
            del out[kept:]
            out.append(p[line_start:line_end])
            cleaner.in_tag, tag_began, at = None, None, line_end + 1
            continue
        if cleaner.fence is not None:  # copy through the closing fence line
            close = _closing_fence(cleaner.fence).search(p, at - 1)
            end = len(p) if close is None else _line_end(p, close.end())
            out.append(p[at:end])
            cleaner.fence = None
            at = end + 1
            continue
        if cleaner.in_comment or cleaner.in_head:  # drop the lines before the one that ends the block
            found = p.find("-->", at) if cleaner.in_comment else _search_start(_HEAD_CLOSE_LINE, p, at)
            if found < 0:
                break
            at = p.rfind("\n", 0, found) + 1
        elif cleaner.in_export:  # only a line with a closing bracket can end the statement
            found = _search_start(_CLOSER, p, at)
            if found < 0:
                break
            line_start = p.rfind("\n", 0, found) + 1
            if line_start > at:
                cleaner.in_export += sum(p.count(c, at, line_start) for c in "{[(")
                at = line_start
        elif cleaner.in_tag is not None:  # every line until the tag closes
            pass
        else:  # copy the lines that cannot change anything
            line_start = candidates.next(at)
            if line_start > at:
                out.append(p[at : line_start - 1])
                at = line_start
                continue
        end = _line_end(p, at)
        in_tag = cleaner.in_tag is not None
        kept = len(out)
        cleaner.line(p[at:end])
        if cleaner.in_tag is None:
            tag_began = None
        elif not in_tag:
            tag_began = (at, end, kept)
        at = end + 1
        # a setext underline right after a line just cleaned may clean it further
        while at <= len(p) and cleaner.normal and _SETEXT_UNDERLINE.match(p[at : _line_end(p, at)]):
            end = _line_end(p, at)
            cleaner.line(p[at:end])
            at = end + 1
    joined = "\n".join(out)
    if "\n\n\n" in joined:
        joined = _BLANK_RUN.sub("\n\n", joined)
    return joined.strip("\n") + ("\n" if joined.strip() else "")


class _Candidates:
    """Where the next line starts that `clean_body` must look at (outside fences, comments, `<head>` blocks and
    statements), in "\n"-prefixed text: each kind is found by its own search (a substring search where it can
    be), and each search resumes where it left off, so finding them all is one pass per kind."""

    def __init__(self, p: str):
        self._p = p
        starts = [pattern for trigger, pattern in (
            (("```", "~~~"), r"[ \t]{0,3}(?:`{3}|~{3})"), (("<h", "<H"), r"[^\S\n]*<(?i:head)"),
            (("import", "export"), r"import|export"), (("<",), r"[ \t]*</?[A-Z]")) if any(t in p for t in trigger)]
        self._starts = re.compile(r"\n(?:" + "|".join(starts) + ")") if starts else None
        self._comments = "<!--" in p
        self._markup = "{" in p or "<" in p
        self._found: dict[str, int] = {}  # kind -> the next line of that kind found so far

    def next(self, at: int) -> int:
        """The start of the first line at or after `at` that may change something (len + 1: none)."""
        none = len(self._p) + 1
        best = none
        for kind, wanted in (("starts", self._starts is not None), ("comment", self._comments),
                             ("markup", self._markup)):
            if not wanted:
                continue
            found = self._found.get(kind, -1)
            if found < at:
                found = self._found[kind] = self._search(kind, at)
            best = min(best, found)
        return best

    def _search(self, kind: str, at: int) -> int:
        p, none = self._p, len(self._p) + 1
        if kind == "starts":
            assert self._starts is not None
            found = self._starts.search(p, at - 1)
            return none if found is None else found.start() + 1
        if kind == "comment":
            found_at = p.find("<!--", at)
            return none if found_at < 0 else p.rfind("\n", 0, found_at) + 1
        # `{` or `<`: a heading whose attributes or anchor cleaning removes, or the text of a setext heading
        # (then its underline is the line to look at: it cleans the line before)
        while at <= len(p):
            brace, angle = p.find("{", at), p.find("<", at)
            hit = min(brace, angle) if brace >= 0 and angle >= 0 else max(brace, angle)
            if hit < 0:
                return none
            line = p.rfind("\n", 0, hit) + 1
            end = _line_end(p, line)
            if _ATX_OPEN.match(p, line):
                return line
            if end < len(p) and _SETEXT_UNDERLINE.match(p[end + 1 : _line_end(p, end + 1)]):
                return end + 1
            at = end + 1
        return none


def plain_lines(text: str) -> str:
    """The text with "\n" as its only line break (`"\n".join(text.splitlines())` but for a final newline).
    Usually a `str.replace` or nothing."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if not any(brk in text for brk in _OTHER_BREAKS):  # one `in` each runs at memchr speed
        return text
    return "\n".join(text.splitlines())


class _Cleaner:
    """`clean_body`'s rule for one line at a time, with the state it carries from line to line."""

    def __init__(self) -> None:
        self.out: list[str] = []  # lines, or runs of unchanged lines joined by "\n"
        self.fence: str | None = None
        self.in_comment = self.in_head = False
        self.in_export = 0  # open brackets of a multi-line `export const x = {` (or `= [`, `(`) statement
        self.in_tag: _TagState | None = None  # inside a component's tag that began on an earlier line
        self.tag_lines = 0  # lines that tag has run over so far
        # lines read again after tags that never closed: past this, an unclosed tag is text (linear time on
        # hostile input, a line of `<A` after another)
        self.tag_budget = 20 * _MAX_TAG_LINES

    @property
    def normal(self) -> bool:
        return self.fence is None and not self.in_comment and not self.in_head and not self.in_export \
            and self.in_tag is None

    def line(self, line: str) -> None:
        out = self.out
        if self.fence is not None:
            out.append(line)
            match = _FENCE.match(line)
            if match and match.group(1)[0] == self.fence[0] and len(match.group(1)) >= len(self.fence):
                self.fence = None
            return
        if self.in_comment:
            end = line.find("-->")
            if end < 0:
                return
            self.in_comment = False
            line = line[end + 3 :]
        if self.in_head:
            close = _HEAD_CLOSE.search(line)
            if close is None:
                return
            self.in_head = False
            line = line[close.end() :]
        if self.in_export:
            self.in_export = max(self.in_export + _open_brackets(line), 0)
            return
        if self.in_tag is not None:
            self.tag_lines += 1
            rest, self.in_tag = _tags_to_line_end(line, 0, self.in_tag)
            if rest is not None and rest.strip():  # text after the tag closed: kept
                out.append(rest)
            return
        match = _FENCE.match(line)
        if match:
            self.fence = match.group(1)
            out.append(line)
            return
        line, self.in_comment = _strip_comments(line)
        if _HEAD_OPEN.match(line):
            close = _HEAD_CLOSE.search(line)
            if close is None:
                self.in_head = True
                return
            line = line[close.end() :]
        if _MDX_LINE.match(line):
            if line.startswith("export"):
                self.in_export = max(_open_brackets(line), 0)
            return
        if line.startswith("import") and _MDX_IMPORT_OPEN.match(line):
            self.in_export = max(_open_brackets(line), 0)
            return
        if "<" in line and (_JSX_LINE.match(line) or self._component_tags(line)):
            return
        if "#" in line or "<" in line:
            line = _clean_atx(line)
        elif out and _SETEXT_UNDERLINE.match(line):
            head, newline, last = out[-1].rpartition("\n")  # the previous line (out holds runs of lines too)
            if last.strip() and not _NOT_PARAGRAPH.match(last):
                out[-1] = head + newline + clean_heading(last)  # the last line of a setext heading's text
        out.append(line)


    def _component_tags(self, line: str) -> bool:
        """True when the line is only component tags, the last of which may go on over the next lines (then the
        cleaner is `in_tag` until it closes); a line with text besides tags is not one."""
        if not _COMPONENT_TAG.match(line):
            return False
        rest, state = _tags_to_line_end(line, 0, None)
        if rest is not None and rest.strip() or state is not None and self.tag_budget <= 0:
            return False
        self.in_tag, self.tag_lines = state, 0
        return True


@dataclass
class _TagState:
    """Where a scan stopped inside a component's tag: how deep in `{…}` attribute values, and in which quote."""

    braces: int = 0
    quote: str = ""


def _tags_to_line_end(line: str, at: int, state: _TagState | None) -> tuple[str | None, _TagState | None]:
    """Read component tags from `at` (continuing the tag `state` left open, if any) as long as the line holds only
    tags and blanks. Returns (the text after the last closed tag, None) when a tag closes and something other
    than a tag follows ("" when nothing does), or (None, the state) when the line ends inside a tag."""
    n = len(line)
    while True:
        if state is None:
            while at < n and line[at] in " \t":
                at += 1
            if at == n:
                return "", None
            match = _COMPONENT_TAG.match(line, at)
            if match is None:
                return line[at:], None
            state, at = _TagState(), match.end()
        braces, quote = state.braces, state.quote
        while at < n:
            char = line[at]
            at += 1
            if quote:
                if char == quote:
                    quote = ""
            elif char in "\"'`":
                quote = char
            elif char == "{":
                braces += 1
            elif char == "}":
                braces = max(braces - 1, 0)
            elif char == ">" and not braces:
                break
        else:
            # a quote ends with its line in attributes written as "…" or '…' (JSX strings do not run over lines)
            return None, _TagState(braces, quote if quote == "`" or braces else "")
        state = None


def _line_end(p: str, at: int) -> int:
    end = p.find("\n", at)
    return len(p) if end < 0 else end


def _search_start(pattern: re.Pattern[str], p: str, at: int) -> int:
    found = pattern.search(p, at)
    return -1 if found is None else found.start()


def _closing_fence(fence: str) -> re.Pattern[str]:
    """A line that closes `fence` for `clean_body`: the same character at least as often (anything may follow)."""
    pattern = _closing_fences.get(fence)
    if pattern is None:
        pattern = re.compile(rf"\n[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}")
        if len(_closing_fences) < 64:
            _closing_fences[fence] = pattern
    return pattern


def _open_brackets(line: str) -> int:
    """Brackets a line opens minus those it closes: where a multi-line `export` statement ends."""
    return sum(line.count(c) for c in "{[(") - sum(line.count(c) for c in "}])")


def _strip_comments(line: str) -> tuple[str, bool]:
    """The line without complete `<!-- … -->` comments; True when a comment opens and does not close."""
    while True:
        start = line.find("<!--")
        if start < 0:
            return line, False
        end = line.find("-->", start + 4)
        if end < 0:
            head = line[:start]
            return head, True
        line = line[:start] + line[end + 3 :]


def clean_document(content: str) -> str:
    """The frontmatter block as written, followed by the cleaned body (the answer an agent reads)."""
    text = content[1:] if content.startswith("\ufeff") else content
    body = split_body(text)
    head = text[: len(text) - len(body)] if body and text.endswith(body) else ("" if body == text else text)
    cleaned = clean_body(body)
    if head and cleaned:
        return head + ("" if head.endswith("\n") else "\n") + "\n" + cleaned.lstrip("\n")
    return head + cleaned

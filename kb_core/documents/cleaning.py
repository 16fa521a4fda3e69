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

from kb_core.documents.frontmatter import split_body

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_MDX_LINE = re.compile(r"^(?:import\s+[\w*{}\s,]+\s+from\s+['\"][^'\"]+['\"]|import\s+['\"][^'\"]+['\"]|export\s+"
                       r"(?:const|let|var|function|default)\b).*$")
_HEAD_OPEN = re.compile(r"^\s*<head(\s[^>]*)?>", re.IGNORECASE)
_HEAD_CLOSE = re.compile(r"</head\s*>", re.IGNORECASE)
_BLANK_RUN = re.compile(r"\n{3,}")

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
# (each starts with a literal, so the regex engine jumps between candidates instead of trying every character)
_PROBE_ATX_ATTRIBUTES = re.compile(r"\n {0,3}#{1,6}[ \t][^\n]*\}[ \t#]*(?:\n|$)")
_PROBE_SETEXT_ATTRIBUTES = re.compile(r"\}[ \t]*\n {0,3}(?:=+|-+)[ \t]*(?:\n|$)")
_PROBE_ANCHOR = re.compile(r"<a\s+(?:name|id)\s*=", re.IGNORECASE)
# Lines that cannot end a setext heading's text: list items, quotes, tables, indented code.
_NOT_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}(?:[-+*][ \t]|\d{1,9}[.)][ \t]|>|\|))")


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


def needs_cleaning(body: str) -> bool:
    """False when `clean_body` would only tidy blank lines: no comment, `<head>`, MDX line or heading
    attribute. Lets a caller that scans every document skip the line-by-line pass."""
    return "<!--" in body or (("<h" in body or "<H" in body) and _PROBE_HEAD.search(body) is not None) or (
        ("import" in body or "export" in body) and _PROBE_MDX.search(body) is not None) or (
        "}" in body and (_PROBE_ATX_ATTRIBUTES.search("\n" + body) is not None
                         or _PROBE_SETEXT_ATTRIBUTES.search(body) is not None)) or (
        ("<a" in body or "<A" in body) and _PROBE_ANCHOR.search(body) is not None)


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
    """The body without HTML comments, `<head>` blocks, MDX import/export statements and heading attributes,
    outside code fences."""
    out: list[str] = []
    fence: str | None = None
    in_comment = in_head = False
    in_export = 0  # open brackets of a multi-line `export const x = {` (or `= [`, `(`) statement
    for line in body.splitlines():
        if fence is not None:
            out.append(line)
            match = _FENCE.match(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if in_comment:
            end = line.find("-->")
            if end < 0:
                continue
            in_comment = False
            line = line[end + 3 :]
        if in_head:
            close = _HEAD_CLOSE.search(line)
            if close is None:
                continue
            in_head = False
            line = line[close.end() :]
        if in_export:
            in_export = max(in_export + _open_brackets(line), 0)
            continue
        match = _FENCE.match(line)
        if match:
            fence = match.group(1)
            out.append(line)
            continue
        line, in_comment = _strip_comments(line)
        if _HEAD_OPEN.match(line):
            close = _HEAD_CLOSE.search(line)
            if close is None:
                in_head = True
                continue
            line = line[close.end() :]
        if _MDX_LINE.match(line):
            if line.startswith("export"):
                in_export = max(_open_brackets(line), 0)
            continue
        if "#" in line or "<" in line:
            line = _clean_atx(line)
        elif out and out[-1].strip() and _SETEXT_UNDERLINE.match(line) and not _NOT_PARAGRAPH.match(out[-1]):
            out[-1] = clean_heading(out[-1])  # the last line of a setext heading's text
        out.append(line)
    text = "\n".join(out)
    return _BLANK_RUN.sub("\n\n", text).strip("\n") + ("\n" if text.strip() else "")


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

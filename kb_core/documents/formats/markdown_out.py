"""The Markdown pieces every converter writes: headings, paragraphs, list items, tables, code fences, image
placeholders. Pure.

What a rendition must keep intact is the text an asker types: identifiers (`ERR_GATEWAY_TIMEOUT`,
`proxy-rewrite`, `a.b.c`) are never escaped, so L0, BM25 and "did you mean" see them as they are spelled. Only
what would change the structure is escaped: a paragraph line that would open a heading, a list, a quote, a fence
or a table, and the pipes inside a table cell. Images become a placeholder, `![alt](image)`, never their bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_HEADING = 6
IMAGE_TARGET = "image"  # every placeholder points here: an image's bytes or address never enter a rendition

_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u2000-\u200b\u3000]+")
# a line that Markdown would read as a block of its own: heading, quote, list item, fence, table row, rule
_BLOCK_START = re.compile(r"^(?:#{1,6}(?=\s|$)|>|[-+*](?=\s)|\d{1,9}[.)](?=\s|$)|`{3,}|~{3,}|\||={3,}\s*$"
                          r"|-{3,}\s*$|\*{3,}\s*$)")


def clean_inline(text: str) -> str:
    """One line of text: runs of whitespace (no-break and CJK spaces included) as one space, trimmed."""
    return _SPACES.sub(" ", text.replace("\n", " ")).strip()


def escape_line(line: str) -> str:
    """A paragraph line that would open a block of its own gets a backslash before it."""
    return "\\" + line if _BLOCK_START.match(line) else line


def paragraph(text: str) -> str:
    """A paragraph: each line cleaned and escaped; blank lines dropped (one paragraph stays one block)."""
    lines = [clean_inline(line) for line in text.split("\n")]
    return "\n".join(escape_line(line) for line in lines if line)


def heading(level: int, text: str) -> str:
    text = clean_inline(text).rstrip("#").strip()
    return f"{'#' * min(max(level, 1), MAX_HEADING)} {text}" if text else ""


def list_item(text: str, *, depth: int = 0, number: int | None = None, indent: str | None = None) -> str:
    """One item of a bulleted (`number` None) or numbered list; continuation lines indented under it. `indent`
    (the content column of the parent item) wins over `depth` (two spaces a level, for bullets in bullets)."""
    marker = "-" if number is None else f"{number}."
    indent = "  " * depth if indent is None else indent
    lines = [clean_inline(line) for line in text.split("\n")]
    lines = [line for line in lines if line] or [""]
    pad = indent + " " * (len(marker) + 1)
    return "\n".join([f"{indent}{marker} {lines[0]}".rstrip(), *(pad + line for line in lines[1:])])


def item_indent(indent: str, number: int | None) -> str:
    """The content column of an item: where the lists nested in it start."""
    return indent + " " * (2 if number is None else len(f"{number}.") + 1)


def image(alt: str) -> str:
    """The placeholder of an image: its alt text or description, never its bytes or address."""
    alt = clean_inline(alt).replace("[", "(").replace("]", ")")
    return f"![{alt}]({IMAGE_TARGET})"


def code_block(text: str, language: str = "") -> str:
    """A fenced block, its fence longer than any backtick run inside."""
    text = text.strip("\n")
    if not text.strip():
        return ""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    language = re.sub(r"[^\w+#.-]", "", language)[:20]
    return f"{fence}{language}\n{text}\n{fence}"


def table_cell(text: str) -> str:
    return clean_inline(text).replace("\\", "\\\\").replace("|", "\\|")


def table(rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, the first row as its header; rows padded to one width. Empty when there is no cell."""
    rows = [[table_cell(cell) for cell in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join(["---"] * width) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def quote(block: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in block.split("\n"))


def join_blocks(blocks: Iterable[str]) -> str:
    """The document: blocks separated by one blank line, ending with one newline (empty blocks dropped)."""
    text = "\n\n".join(block.strip("\n") for block in blocks if block and block.strip())
    return text.strip("\n") + "\n" if text.strip() else ""

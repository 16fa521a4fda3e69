"""Text from documents and queries inside Streamlit's Markdown, shown as text and never fetching anything.

Streamlit renders Markdown almost everywhere: `st.markdown`, captions, `st.info`/`st.warning`/`st.error`,
headings, `st.table` cells, `st.progress` text, and the labels of buttons, expanders, tabs and checkboxes. Its
dialect is GitHub-flavoured Markdown plus directives (`:blue-badge[...]`, `:orange-background[...]`,
`:color[...]{...}`), `$...$` math and `:material/...:` icons. Raw HTML is shown as text (no call here passes
`unsafe_allow_html`), links open only when clicked, icons and KaTeX come with Streamlit. What makes the browser
fetch a URL is an image, `![alt](url)` or `![alt][ref]` with `[ref]: url`, and images work in labels too.

So every value that comes from a document (title, summary, keywords, sections, headings, file names), from a
query (`?q=` links, recent queries) or from a message that may quote them, goes through one of these:

- `escape_markdown(value)`: the value as literal text anywhere (a paragraph, a label, a badge, a table cell);
- `inline_code(value)`: the value as one code span that no backtick can close early;
- `neutralize_images(markdown)`: a document's own Markdown (its body, a chunk), still rendered as Markdown,
  with every image turned into a 🖼 placeholder followed by its alt text as a link to the URL;
- `highlight_text(text, spans)`: a chunk shown as literal text line by line, with the given character spans
  (the query's terms, from kb_core) on a highlight; the text is escaped as a whole, the highlight wraps it.

Pure functions, no Streamlit import; tests/unit/test_safe_markdown.py pins them on hostile inputs, and
tests/browser/test_browser_safety.py renders a hostile document in Chromium with a beacon server.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = ["HIGHLIGHT", "IMAGE_PLACEHOLDER", "escape_markdown", "highlight_text", "inline_code",
           "neutralize_images"]

IMAGE_PLACEHOLDER = "🖼\u00a0"  # what an image's `!` becomes: the alt text follows as a link
HIGHLIGHT = ":orange-background["  # opens a highlighted run of `highlight_text`; `]` closes it

# Characters that start or end an inline construct: escapes, code spans, emphasis, strikethrough, links and
# images, directive labels, raw HTML and autolinks, entities, math.
_ALWAYS = set("\\`*~[]<&$")
# At the start of a line: headings, block quotes, list items, setext underlines (the rest are in _ALWAYS).
_LINE_START = re.compile(r"^(?:[#>+=-]|\d{1,9}[.)](?=\s|$))")
_IMAGE = re.compile(r"!\[")


def _word(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


def escape_markdown(value: object) -> str:
    """`value` shown literally by Streamlit's Markdown, on one line (runs of white space become one space).

    Backslash-escapes what could start Markdown syntax: `` \\ ` * ~ [ ] < & $ ``; `_` unless it sits between two
    letters or digits (`ERR_TIMEOUT` can open no emphasis and stays readable as it is); `:` before a letter (a
    directive such as `:red[...]` or `:name`); and a first character that would start a block (`#`, `>`, `-`,
    `+`, `=`, `1.`). Escaping `[` and `]` also defuses images, links and badges, so the result is safe inside
    `:blue-badge[...]` and `**...**` as well.
    """
    text = " ".join(str(value).split())
    out: list[str] = []
    for i, char in enumerate(text):
        if char in _ALWAYS:
            out.append("\\" + char)
        elif char == "_" and not (0 < i < len(text) - 1 and _word(text[i - 1]) and _word(text[i + 1])):
            out.append("\\_")
        elif char == ":" and i + 1 < len(text) and text[i + 1].isascii() and text[i + 1].isalpha():
            out.append("\\:")
        else:
            out.append(char)
    escaped = "".join(out)
    start = _LINE_START.match(escaped)
    if start:
        mark = start.group(0)
        escaped = (mark[:-1] + "\\" + mark[-1]) + escaped[len(mark):]
    return escaped


def inline_code(value: object) -> str:
    """`value` as one inline code span: fenced by more backticks than its longest run of backticks, padded with
    a space where it starts or ends with a backtick (or a space), which the code span then drops again.
    Line breaks become spaces, as inside any code span; an empty value gives an empty string."""
    text = re.sub(r"[\r\n]+", " ", str(value))
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " " and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def neutralize_images(markdown: str) -> str:
    """A document's Markdown with no image left: every `![` becomes `🖼 [`, so `![alt](url)`, `![alt][ref]` and
    `![ref]` render as a placeholder and the alt text as a link (`[alt](url)`), which loads nothing until
    clicked. Everything else (headings, lists, tables, code, links, math) renders as before.

    Deliberately blind to context: `![` is the only way CommonMark, GFM and Streamlit's extensions start an
    image, and it is replaced wherever it is - even inside code spans and fenced code, where it then shows as
    `🖼 [` (the raw view and the agents' answers keep the original). Skipping code would need Streamlit's own
    parser to know where code is: a guess that treats text as code (an unclosed fence inside an HTML block, a
    backtick inside an HTML attribute) would let an image through.
    """
    return _IMAGE.sub(IMAGE_PLACEHOLDER + "[", markdown)


# In a highlighted text every `_` and `:` is escaped too (a highlight's directive may follow either), and `|` (lines
# stay lines there, and two of them could make a table).
_ALWAYS_IN_LINES = _ALWAYS | set("_:|")


def highlight_text(text: str, spans: Iterable[tuple[int, int]] = ()) -> str:
    """`text` shown literally, one line of the result per non-blank line of it (runs of white space become one
    space, leading ones go), with the characters inside `spans` — `(start, stop)` offsets into `text`, such as
    kb_core's matched query terms — on an orange background.

    Every character is escaped as in `escape_markdown` (plus every `_`, `:` and `|`), with each line's start
    defused, before the highlight's own `:orange-background[` and `]` are put around runs of escaped characters:
    no character of `text` can end a highlight, open another construct or start a block, whatever the spans."""
    chosen = [(int(a), int(b)) for a, b in spans]
    lines = []
    offset = 0
    for line in str(text).split("\n"):
        start, stop = offset, offset + len(line)
        offset = stop + 1
        marked = [False] * len(line)
        for a, b in chosen:
            for i in range(max(a, start), min(b, stop)):
                marked[i - start] = True
        rendered = _highlight_line(line, marked)
        if rendered:
            lines.append(rendered)
    return "  \n".join(lines)


def _highlight_line(line: str, marked: list[bool]) -> str:
    chars: list[tuple[str, bool]] = []
    for char, mark in zip(line, marked, strict=True):
        if char.isspace():
            if chars and chars[-1][0] != " ":
                chars.append((" ", False))
        else:
            chars.append((char, mark))
    while chars and chars[-1][0] == " ":
        chars.pop()
    # a space between two highlighted characters stays inside the highlight
    for i in range(1, len(chars) - 1):
        if chars[i][0] == " " and chars[i - 1][1] and chars[i + 1][1]:
            chars[i] = (" ", True)
    pieces = ["\\" + c if c in _ALWAYS_IN_LINES else c for c, _mark in chars]
    start = _LINE_START.match("".join(pieces))
    if start:
        pieces[len(start.group(0)) - 1] = "\\" + pieces[len(start.group(0)) - 1]
    out: list[str] = []
    inside = False
    for piece, (_char, mark) in zip(pieces, chars, strict=True):
        if mark != inside:
            out.append(HIGHLIGHT if mark else "]")
            inside = mark
        out.append(piece)
    if inside:
        out.append("]")
    return "".join(out)

"""pages/shell/safe.py on hostile input: what the console hands Streamlit's Markdown for text
that comes from a document or a query. Golden strings first, then invariants over any text (hypothesis).

That Streamlit's own parser shows these results as the literal text, and that nothing is fetched, is checked
in Chromium by tests/browser/test_browser_safety.py."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.paths import REPO

from pages.shell.safe import (
    HIGHLIGHT,
    IMAGE_PLACEHOLDER,
    escape_markdown,
    highlight_text,
    inline_code,
    neutralize_images,
)

PH = IMAGE_PLACEHOLDER


@pytest.mark.parametrize(("text", "shown"), [
    # images, links, reference definitions: no `[` or `]` left to start one
    ("![x](http://127.0.0.1:9/i.png)", r"!\[x\](http://127.0.0.1:9/i.png)"),
    ("![x][r]", r"!\[x\]\[r\]"),
    ("[r]: http://127.0.0.1:9/r.png", r"\[r\]: http://127.0.0.1:9/r.png"),
    # a keyword with a backtick and a `]`: neither closes the code span or badge it is put in
    ("a`b]c", r"a\`b\]c"),
    ("x] ![y](http://127.0.0.1:9/b.png) :red[z", r"x\] !\[y\](http://127.0.0.1:9/b.png) \:red\[z"),
    # raw HTML and entities show as typed (Streamlit would show the tag as text anyway)
    ('<img src=x onerror="fetch(1)">', r'\<img src=x onerror="fetch(1)">'),
    ("&lt;b&gt; &amp;", r"\&lt;b\&gt; \&amp;"),
    # emphasis, strikethrough, math, directives
    ("**bold** *it* ~~gone~~ ~x~", r"\*\*bold\*\* \*it\* \~\~gone\~\~ \~x\~"),
    ("_it_ __init__ a_b", r"\_it\_ \_\_init\_\_ a_b"),
    ("$x^2$ and $$y$$", r"\$x^2\$ and \$\$y\$\$"),
    (":blue-badge[x] :material/home: :name", r"\:blue-badge\[x\] \:material/home: \:name"),
    ("back\\slash\\", "back\\\\slash\\\\"),
    # a block at the start of the text: heading, quote, list items, setext/thematic lines
    ("# Heading", r"\# Heading"),
    ("> quote", r"\> quote"),
    ("- item", r"\- item"),
    ("+ item", r"\+ item"),
    ("1. first", r"1\. first"),
    ("2) second", r"2\) second"),
    ("===", r"\==="),
    ("---", r"\---"),
    ("***", r"\*\*\*"),
    # line breaks and indentation cannot start another block
    ("a\n# b\r\n    c\n\n[r]: http://127.0.0.1:9/", r"a # b c \[r\]: http://127.0.0.1:9/"),
    ("    indented code", "indented code"),
    # ordinary titles, paths, keywords and messages stay as they are
    ("ERR_TIMEOUT", "ERR_TIMEOUT"),
    ("knowledge_base/api/payment-errors.md", "knowledge_base/api/payment-errors.md"),
    ("超时_排查", "超时_排查"),
    ("Part 4 > Item 4.10", "Part 4 > Item 4.10"),
    ("section: 1. 超时类错误", "section: 1. 超时类错误"),
    ("did you mean 'gateway-plugins'?", "did you mean 'gateway-plugins'?"),
    ("http://example.com/a_b", "http://example.com/a_b"),
    (42, "42"),
    ("", ""),
])
def test_escape_markdown(text, shown):
    assert escape_markdown(text) == shown


@pytest.mark.parametrize(("text", "code"), [
    ("plain", "`plain`"),
    ("a`b]c", "``a`b]c``"),
    ("`", "`` ` ``"),
    ("``x", "``` ``x ```"),
    ("x`", "`` x` ``"),
    ("a ``` b ` c", "````a ``` b ` c````"),
    (" padded ", "`  padded  `"),  # begins and ends with a space: the span strips one of each again
    ("   ", "`   `"),
    ("![x](http://127.0.0.1:9/c.png)", "`![x](http://127.0.0.1:9/c.png)`"),  # no image inside a code span
    ("line\nbreak\r\nx", "`line break x`"),
    ("", ""),
])
def test_inline_code(text, code):
    assert inline_code(text) == code


@pytest.mark.parametrize(("markdown", "shown"), [
    ("![alt](http://127.0.0.1:9/1.png)", f"{PH}[alt](http://127.0.0.1:9/1.png)"),
    ('![alt](http://127.0.0.1:9/1.png "title")', f'{PH}[alt](http://127.0.0.1:9/1.png "title")'),
    ("![alt][logo]\n\n[logo]: http://127.0.0.1:9/2.png", f"{PH}[alt][logo]\n\n[logo]: http://127.0.0.1:9/2.png"),
    ("![logo]\n\n[logo]: http://127.0.0.1:9/3.png", f"{PH}[logo]\n\n[logo]: http://127.0.0.1:9/3.png"),
    ("[![badge](http://127.0.0.1:9/4.svg)](http://x)", f"[{PH}[badge](http://127.0.0.1:9/4.svg)](http://x)"),
    ("| a | ![t](http://127.0.0.1:9/5.png) |", f"| a | {PH}[t](http://127.0.0.1:9/5.png) |"),
    ("!![a](u)", f"!{PH}[a](u)"),
    # an escaped `!` is replaced too: a backslash may be literal (the end of a code span) and the image real
    ("`x\\`![a](http://127.0.0.1:9/6.png)", f"`x\\`{PH}[a](http://127.0.0.1:9/6.png)"),
    # deliberately also inside code (see the docstring): better a visible placeholder than a guessed context
    ("```\nif (![].length) {}\n```", f"```\nif ({PH}[].length) {{}}\n```"),
    # everything else is the document's Markdown as written
    ("# Title\n\n- a [link](http://x) !important\n\n```py\nx = 1\n```\n\n$E=mc^2$",
     "# Title\n\n- a [link](http://x) !important\n\n```py\nx = 1\n```\n\n$E=mc^2$"),
    ('<img src="http://127.0.0.1:9/7.png" onerror="x()">', '<img src="http://127.0.0.1:9/7.png" onerror="x()">'),
])
def test_neutralize_images(markdown, shown):
    assert neutralize_images(markdown) == shown


_SPECIAL = set("\\`*~[]<&$")


def _word(char: str) -> bool:
    """A letter or a digit: CommonMark's `_` opens or closes no emphasis between two of them."""
    return unicodedata.category(char)[0] in "LN"


def _unescape_checked(escaped: str) -> str:
    """Read `escaped` as Markdown text: every special character must come escaped; returns the text shown."""
    out, i = [], 0
    while i < len(escaped):
        char = escaped[i]
        if char == "\\":
            assert i + 1 < len(escaped), f"a trailing backslash in {escaped!r}"
            following = escaped[i + 1]
            assert following.isascii() and not following.isalnum() and not following.isspace(), escaped
            out.append(following)
            i += 2
            continue
        assert char not in _SPECIAL, f"{char!r} unescaped at {i} in {escaped!r}"
        if char == "_":
            assert 0 < i < len(escaped) - 1 and _word(escaped[i - 1]) and _word(escaped[i + 1]), escaped
        if char == ":" and i + 1 < len(escaped):
            assert not (escaped[i + 1].isascii() and escaped[i + 1].isalpha()), escaped
        out.append(char)
        i += 1
    return "".join(out)


@given(st.text())
def test_escaped_text_reads_back_as_the_text_on_one_line(text):
    escaped = escape_markdown(text)
    assert "\n" not in escaped and "\r" not in escaped
    assert not re.match(r"[#>+=-]|\d{1,9}[.)](\s|$)", escaped)  # starts no block
    assert _unescape_checked(escaped) == " ".join(text.split())


@given(st.text(alphabet=st.sampled_from("`ab \n]")))
def test_no_backtick_run_closes_an_inline_code_span_early(text):
    code = inline_code(text)
    if not text:
        assert code == ""
        return
    fence = re.match(r"`+", code).group(0)
    assert code.endswith(fence)
    inner = code[len(fence):-len(fence)]
    assert all(len(run) != len(fence) for run in re.findall(r"`+", inner))
    if inner.startswith(" ") and inner.endswith(" ") and inner.strip():
        inner = inner[1:-1]  # CommonMark strips one space on each side
    assert inner == re.sub(r"[\r\n]+", " ", text)


@given(st.text(alphabet=st.sampled_from("![]()\\`ab\n")))
def test_no_image_syntax_survives(markdown):
    assert "![" not in neutralize_images(markdown)


@pytest.mark.parametrize(("text", "spans", "shown"), [
    # a chunk's lines stay lines; each line's start is defused; the spans are on a highlight
    ("# 超时 排查\n- a\n\n   1. b", [(2, 4)], "\\# " + HIGHLIGHT + "超时] 排查  \n\\- a  \n1\\. b"),
    # the text cannot end the highlight, open a directive, an image, a link, a table or emphasis
    ("x]:red[y] ![i](http://127.0.0.1:9/i.png)", [(0, 2)],
     HIGHLIGHT + "x\\]]\\:red\\[y\\] !\\[i\\](http\\://127.0.0.1\\:9/i.png)"),
    ("| a | b |\n| --- | --- |", [], "\\| a \\| b \\|  \n\\| --- \\| --- \\|"),
    ("ERR_TIMEOUT: _x_ *y*", [(4, 11)], "ERR\\_" + HIGHLIGHT + "TIMEOUT]\\: \\_x\\_ \\*y\\*"),
    # two highlighted words with a space between are one highlight; spans past the end are cut
    ("rate limiting", [(0, 4), (5, 13), (10, 99)], HIGHLIGHT + "rate limiting]"),
    ("", [(0, 3)], ""),
])
def test_highlight_text(text, spans, shown):
    assert highlight_text(text, spans) == shown


_IN_LINES = _SPECIAL | set("_:|")


def _unhighlight_checked(markdown: str) -> tuple[str, set[int]]:
    """Read `highlight_text`'s result: escapes, and highlights that open and close only where it put them;
    returns the text shown and the offsets (into it) of the highlighted characters."""
    out: list[str] = []
    marked: set[int] = set()
    inside = False
    i = 0
    while i < len(markdown):
        if markdown.startswith(HIGHLIGHT, i):
            assert not inside, markdown
            inside = True
            i += len(HIGHLIGHT)
            continue
        char = markdown[i]
        if char == "]":
            assert inside, f"an unescaped ] outside a highlight in {markdown!r}"
            inside = False
            i += 1
            continue
        if char == "\\":
            following = markdown[i + 1]
            assert following.isascii() and not following.isalnum() and not following.isspace(), markdown
            char = following
            i += 1
        else:
            assert char not in _IN_LINES, f"{char!r} unescaped at {i} in {markdown!r}"
        if inside:
            marked.add(len(out))
        out.append(char)
        i += 1
    assert not inside, markdown
    return "".join(out), marked


@given(st.text(alphabet=st.sampled_from("ab 超\n]:[`*_|#-1.!\\<&$~")),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=4))
def test_highlighted_text_reads_back_line_by_line_whatever_the_spans(text, spans):
    markdown = highlight_text(text, spans)
    lines = [" ".join(line.split()) for line in text.split("\n")]
    lines = [line for line in lines if line]
    assert markdown.count("  \n") == max(0, len(lines) - 1)
    for rendered, expected in zip(markdown.split("  \n") if markdown else [], lines, strict=True):
        assert not re.match(r"[#>+=-]|\d{1,9}[.)](\s|$)", rendered)  # starts no block
        shown, _marked = _unhighlight_checked(rendered)
        assert shown == expected
    # every character inside a span (and not white space) is highlighted
    wanted = {i for a, b in spans for i in range(a, b) if i < len(text) and not text[i].isspace()}
    flat, marked = _unhighlight_checked(markdown.replace("  \n", "\n"))
    shown_positions = [i for i, c in enumerate(text) if not c.isspace()]
    highlighted = {shown_positions[k] for k in range(len(shown_positions))
                   if _nonspace_index(flat, k) in marked}
    assert highlighted == wanted


def _nonspace_index(flat: str, k: int) -> int:
    """The offset in `flat` of its k-th character that is not white space."""
    count = -1
    for i, c in enumerate(flat):
        if not c.isspace():
            count += 1
            if count == k:
                return i
    raise AssertionError((flat, k))


def test_no_page_renders_raw_html_or_loads_an_image():
    """Streamlit shows HTML in Markdown as text unless a call says otherwise, and loads images only where a page
    asks for one: no page may (st.html, st.image, components, ImageColumn, unsafe_allow_html)."""
    import ast

    root = REPO
    offenders = []
    for path in [root / "app.py", *(root / "pages").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "unsafe_allow_html":
                offenders.append(f"{path.name}:{node.value.lineno} unsafe_allow_html")
            if isinstance(node, ast.Attribute) and node.attr in ("html", "image", "components", "ImageColumn"):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert offenders == []

"""An HTML tree (lxml) as Markdown blocks: the writer behind HTML pages and Word documents (mammoth's HTML).

What is left out is page chrome and anything that is not text: scripts, styles, forms, navigation, page headers
and footers, sidebars (`nav`, `header`, `footer`, `aside` and their ARIA roles), hidden elements, permalink marks
beside headings (Sphinx's `¶`, a `#` anchor). A `header` inside the page's `main` or `article` is the
article's own: its headings stay.

Links keep their text; an absolute address (`http`, `https`, `mailto`) stays beside it as `[text](address)`
because an agent can quote it, while a relative or in-page link (`../install.html`, `#usage`) is text alone: it
pointed into the site the page came from and leads nowhere once the page is in the knowledge base. Images are
placeholders with their alt text (`alt=""` marks a decorative image: left out); code blocks keep their lines and
their language; tables become Markdown tables (a one-column or one-row layout table becomes its cells' text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lxml import etree

from kb_core.documents.formats import markdown_out as md

CHROME_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe", "svg",
    "button", "select", "input", "textarea", "object", "embed", "canvas", "audio", "video", "map", "dialog",
    "menu", "link", "meta", "head", "title", "math",
})
# what never holds a page's text, even on a page that wraps its article in an `aside` or a `form`
NEVER_TEXT = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "audio", "video", "object",
                        "embed", "iframe", "link", "meta", "head", "title", "math", "button", "select", "input",
                        "textarea"})
CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar",
                          "toolbar", "dialog"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "body", "html", "ul", "ol", "li", "table", "pre", "blockquote",
    "dl", "dt", "dd", "figure", "figcaption", "hr", "address", "details", "summary", "center", "fieldset",
    *_HEADINGS,
})
_CODE_INLINE = frozenset({"code", "kbd", "samp", "tt", "var"})
_PERMALINK_MARKS = frozenset({"¶", "#", "§", "🔗", "link", "permalink"})
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_LANGUAGE = re.compile(r"(?:language|lang|highlight)-([\w+#.-]+)")
_ABSOLUTE = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)
MAX_DEPTH = 200  # deeper than this, an element's text is taken whole (no stack overflow on hostile nesting)


def tag_of(element: etree._Element) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def is_chrome(element: etree._Element, *, lenient: bool = False) -> bool:
    """Page chrome or hidden: left out with everything inside it (`lenient`: only what never holds text)."""
    tag = tag_of(element)
    if not tag:  # a comment or a processing instruction
        return True
    if lenient:
        return tag in NEVER_TEXT
    if tag == "header" and any(tag_of(a) in ("article", "main") for a in element.iterancestors()):
        return False  # the article's own header: `Writer` keeps only its headings
    if tag in CHROME_TAGS:
        return True
    role = (element.get("role") or "").strip().lower()
    if role in CHROME_ROLES:
        return True
    if element.get("hidden") is not None or (element.get("aria-hidden") or "").lower() == "true":
        return True
    return bool(_HIDDEN_STYLE.search(element.get("style") or ""))


def content_root(root: etree._Element) -> etree._Element:
    """Where the page's own text is: its `main` (or role=main), else its one `article`, else its body."""
    for path in ("//main", "//*[@role='main']"):
        found = [e for e in root.xpath(path) if _has_text(e)]
        if found:
            return found[0]
    articles = [e for e in root.xpath("//article") if _has_text(e)]
    if len(articles) == 1:
        return articles[0]
    bodies = root.xpath("//body")
    return bodies[0] if bodies else root


def _has_text(element: etree._Element) -> bool:
    return any(t.strip() for t in element.itertext())


def link_heavy(root: etree._Element) -> set[etree._Element]:
    """Lists, tables and blocks that are mostly link text (menus, link farms, "related" boxes), in one pass from
    the leaves up: for a page without `main` or `article`, where chrome is not marked as such."""
    total: dict[etree._Element, int] = {}
    linked: dict[etree._Element, int] = {}
    links: dict[etree._Element, int] = {}
    for element in reversed(list(root.iter())):
        children = [c for c in element if isinstance(c.tag, str)]
        size = len((element.text or "").strip()) + sum(total.get(c, 0) + len((c.tail or "").strip()) for c in children)
        total[element] = size
        is_link = tag_of(element) == "a"
        linked[element] = size if is_link else sum(linked.get(c, 0) for c in children)
        links[element] = int(is_link) + sum(links.get(c, 0) for c in children)
    return {e for e in total if tag_of(e) in _LINK_LISTS and links[e] >= 3 and linked[e] > 0.6 * max(total[e], 1)
            and total[e] - linked[e] < MAX_UNLINKED}  # a wrapper holding an article's text is no menu


_LINK_LISTS = frozenset({"ul", "ol", "div", "table", "section", "p", "dl"})
MAX_UNLINKED = 300  # characters of text outside links a menu may hold


class Writer:
    """Markdown blocks of one tree; `blocks(root)` is the whole conversion (`skip`: elements left out)."""

    def __init__(self, skip: set[etree._Element] | None = None, *, lenient: bool = False) -> None:
        self.out: list[str] = []
        self._inline: list[str] = []
        self.skip = skip or set()
        self.lenient = lenient

    def blocks(self, root: etree._Element) -> list[str]:
        self._children(root, 0)
        self._flush()
        return self.out

    def _flush(self) -> None:
        text = "".join(self._inline)
        self._inline = []
        if text.strip():  # HTML's line breaks in text are spaces: a paragraph is one line
            self.out.append(md.paragraph(md.clean_inline(text)))

    def _emit(self, block: str) -> None:
        self._flush()
        if block:
            self.out.append(block)

    def _children(self, element: etree._Element, depth: int) -> None:
        """The text and children of a block container, in order; inline runs become paragraphs."""
        if element.text:
            self._inline.append(element.text)
        for child in element:
            if not is_chrome(child, lenient=self.lenient) and child not in self.skip:
                self._element(child, depth + 1)
            if child.tail:
                self._inline.append(child.tail)

    def _element(self, element: etree._Element, depth: int) -> None:
        tag = tag_of(element)
        if depth > MAX_DEPTH:
            self._emit(md.paragraph(" ".join(element.itertext())))
        elif tag == "header":
            for heading in element.iter(*_HEADINGS):
                self._emit(md.heading(_HEADINGS[tag_of(heading)], self.inline(heading)))
        elif tag in _HEADINGS:
            self._emit(md.heading(_HEADINGS[tag], self.inline(element)))
        elif tag in ("ul", "ol"):
            self._emit(self.list_block(element, 0))
        elif tag == "pre":
            self._emit(md.code_block("".join(element.itertext()), _language(element)))
        elif tag == "table":
            self._table(element)
        elif tag == "blockquote":
            inner = Writer().blocks(element)
            self._emit(md.quote("\n\n".join(inner)) if inner else "")
        elif tag == "img":
            self._image(element, block=True)
        elif tag == "hr":
            self._flush()
        elif tag in _BLOCKS:
            self._flush()
            self._children(element, depth)
            self._flush()
        else:
            self._inline.append(self._inline_child(element, depth))

    def _image(self, element: etree._Element, *, block: bool) -> str:
        alt = element.get("alt")
        text = "" if alt is not None and not alt.strip() else md.image(alt or element.get("title") or "")
        if block:
            self._emit(text)
        return text

    def inline(self, element: etree._Element, depth: int = 0) -> str:
        """The text of an element as one Markdown line (links, code spans, image placeholders kept)."""
        if depth > MAX_DEPTH:
            return " ".join(element.itertext())
        parts = [element.text or ""]
        for child in element:
            if not is_chrome(child):
                parts.append(self._inline_child(child, depth))
            parts.append(child.tail or "")
        return md.clean_inline("".join(parts))

    def _inline_child(self, child: etree._Element, depth: int) -> str:
        tag = tag_of(child)
        if tag == "br":
            return " "
        if tag == "img":
            return self._image(child, block=False)
        if tag == "a":
            return self._link(child, depth)
        text = self.inline(child, depth + 1)
        if tag in _CODE_INLINE and text:
            tick = "``" if "`" in text else "`"
            return f"{tick}{text}{tick}"
        return f" {text} " if tag in _BLOCKS else text

    def _link(self, element: etree._Element, depth: int) -> str:
        text = self.inline(element, depth + 1)
        href = (element.get("href") or "").strip()
        classes = (element.get("class") or "").split()
        if "headerlink" in classes or (href.startswith("#") and text.strip().lower() in _PERMALINK_MARKS):
            return ""
        if text and _ABSOLUTE.match(href) and text != href and "(" not in href and " " not in href \
                and not text.startswith("!["):  # a linked image stays its placeholder
            return f"[{text.replace('[', '(').replace(']', ')')}]({href})"
        return text

    def list_block(self, element: etree._Element, depth: int, indent: str = "") -> str:
        """A list and the lists nested in its items, one block."""
        ordered = tag_of(element) == "ol"
        number = _start(element) if ordered else None
        lines = []
        for item in element:
            if tag_of(item) != "li" or is_chrome(item):
                continue
            own, nested = self._item_parts(item, depth, md.item_indent(indent, number))
            lines.append(md.list_item(own, number=number, indent=indent))
            lines += nested
            number = number + 1 if number is not None else None
        return "\n".join(lines)

    def _item_parts(self, item: etree._Element, depth: int, inner: str) -> tuple[str, list[str]]:
        """An item's own text (nested lists left out) and its nested lists' lines, starting at `inner`."""
        nested: list[str] = []
        parts = [item.text or ""]
        for child in item:
            tag = tag_of(child)
            if tag in ("ul", "ol") and depth < MAX_DEPTH:
                nested.append(self.list_block(child, depth + 1, inner))
            elif not is_chrome(child):
                parts.append(" " + self._inline_child(child, depth) + " ")
            parts.append(child.tail or "")
        return md.clean_inline("".join(parts)), [n for n in nested if n]

    def _table(self, element: etree._Element) -> None:
        rows = [[self.inline(cell) for cell in _cells(row)] for row in _rows(element)]
        rows = [row for row in rows if any(cell.strip() for cell in row)]
        width = max((len(row) for row in rows), default=0)
        if width == 1 or len(rows) == 1:  # a layout table: its cells are paragraphs
            for row in rows:
                for cell in row:
                    self._emit(md.paragraph(cell))
        else:
            self._emit(md.table(rows))


def _rows(table: etree._Element) -> Iterator[etree._Element]:
    """The table's own rows (thead, tbody, tfoot or bare), not those of tables nested in its cells."""
    for child in table:
        tag = tag_of(child)
        if tag == "tr":
            yield child
        elif tag in ("thead", "tbody", "tfoot"):
            yield from (row for row in child if tag_of(row) == "tr")


def _cells(row: etree._Element) -> Iterator[etree._Element]:
    for cell in row:
        if tag_of(cell) in ("td", "th"):
            yield cell
            for _ in range(min(_int(cell.get("colspan"), 1), 50) - 1):
                yield etree.Element("td")


def _int(value: str | None, default: int) -> int:
    try:
        return max(int((value or "").strip()), 1)
    except ValueError:
        return default


def _start(element: etree._Element) -> int:
    try:
        return int((element.get("start") or "1").strip())
    except ValueError:
        return 1


def _language(pre: etree._Element) -> str:
    for element in (pre, *pre.iter("code")):
        found = _LANGUAGE.search(element.get("class") or "")
        if found:
            return found.group(1)
    parent = pre.getparent()
    found = _LANGUAGE.search(parent.get("class") or "") if parent is not None else None
    return found.group(1) if found else ""


def markdown_of(root: etree._Element, *, prune_links: bool = False) -> list[str]:
    """The Markdown blocks of a tree (its content root is the caller's choice); `prune_links` leaves out the
    blocks that are mostly links. A page whose every text sits inside chrome elements (an article wrapped in an
    `aside` or a `form`) is written again with only scripts, styles and controls left out."""
    blocks = Writer(link_heavy(root) if prune_links else None).blocks(root)
    if any(block.strip() for block in blocks):
        return blocks
    return Writer(lenient=True).blocks(root)

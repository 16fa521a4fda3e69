"""HTML pages (`.html`, `.htm`) as Markdown: lxml's HTML parser (libxml2, tolerant of real-world markup), the
page's own text found by its semantic elements (`html_markdown.content_root`), written by `html_markdown`.

Without a `main` or `article`, blocks that are mostly links (menus, link farms) are left out too.

The title suggestion is the page's first `h1` when the `<title>` starts with it (a `<title>` usually appends
the site's name: "Broadcasting - NumPy v2.4 Manual"), else the `<title>`, else that `h1`.
"""

from __future__ import annotations

from lxml import etree, html

from kb_core.documents.formats import markdown_out as md
from kb_core.documents.formats.html_markdown import content_root, markdown_of, tag_of
from kb_core.documents.formats.kinds import decode_text
from kb_core.errors import DamagedDocumentRejected


def parse(data: bytes, file_name: str) -> etree._Element:
    """The page's tree; UTF-8 bytes read as UTF-8, others by the page's own charset declaration."""
    text = decode_text(data)
    parser = html.HTMLParser(encoding="utf-8" if text is not None else None, remove_comments=True,
                             remove_pis=True, no_network=True)
    try:
        root = html.document_fromstring(data, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise DamagedDocumentRejected(f"{file_name} cannot be read as HTML ({exc})") from None
    if root is None:
        raise DamagedDocumentRejected(f"{file_name} cannot be read as HTML: it holds no elements")
    return root


def title_of(root: etree._Element) -> str:
    titles = root.xpath("//title")
    page_title = md.clean_inline("".join(titles[0].itertext())) if titles else ""
    body = content_root(root)
    first_h1 = next((md.clean_inline("".join(h.itertext())) for h in body.iter("h1")), "")
    first_h1 = first_h1.rstrip("¶#§ ").strip()
    if first_h1 and (not page_title or page_title.startswith(first_h1)):
        return first_h1
    return page_title or first_h1


def convert_html(data: bytes, file_name: str) -> tuple[str, str]:
    """(Markdown, title suggestion) of an HTML page."""
    root = parse(data, file_name)
    body = content_root(root)
    if tag_of(body) == "html":
        body = next(iter(root.xpath("//body")), root)
    # a page that marks no main text has its chrome unmarked too: menus and link lists are left out by density
    return md.join_blocks(markdown_of(body, prune_links=tag_of(body) in ("body", "html"))), title_of(root)

"""Word documents (.docx) as Markdown: mammoth reads the document's structure (heading styles, lists with
their numbering, tables, images with their descriptions, footnotes) into clean HTML, which `html_markdown`
writes as Markdown, the same writer as HTML pages.

mammoth leaves out page headers and footers, comments and deleted text (tracked changes); it never reads a
linked file from outside the document. The style map adds what mammoth's default leaves as paragraphs: the
Title style (the document's `# ` heading: the other headings move one level down), code and quote styles.
The title suggestion is the document's core property `dc:title`, else its first heading.
"""

from __future__ import annotations

import io
import zipfile

import mammoth
from lxml import etree, html

from kb_core.documents.formats import markdown_out as md
from kb_core.documents.formats.html_markdown import markdown_of, tag_of
from kb_core.errors import DamagedDocumentRejected

STYLE_MAP = """
p[style-name='Title'] => h1.kb-title:fresh
p[style-name='Subtitle'] => p:fresh
p[style-name='Code'] => pre:separator('\\n')
p[style-name='Source Code'] => pre:separator('\\n')
p[style-name='HTML Preformatted'] => pre:separator('\\n')
p[style-name='Macro Text'] => pre:separator('\\n')
p[style-name='Quote'] => blockquote > p:fresh
p[style-name='Intense Quote'] => blockquote > p:fresh
r[style-name='HTML Code'] => code
r[style-name='Source Code Char'] => code
"""
_CORE = "docProps/core.xml"
_DC = "{http://purl.org/dc/elements/1.1/}title"


def _placeholder(image) -> dict[str, str]:
    return {"src": md.IMAGE_TARGET}  # mammoth adds the description as alt; the bytes are never read


def core_title(data: bytes) -> str:
    """The document's own title property (`docProps/core.xml`), or ""."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if _CORE not in archive.namelist():
                return ""
            root = etree.fromstring(archive.read(_CORE), etree.XMLParser(resolve_entities=False, no_network=True))
    except (zipfile.BadZipFile, etree.XMLSyntaxError, KeyError, OSError):
        return ""
    found = root.find(_DC)
    return md.clean_inline(found.text or "") if found is not None else ""


def _shift_below_title(root: etree._Element) -> None:
    """With a Title paragraph, it is the one `# `: every other heading moves a level down (h6 stays h6)."""
    if not root.xpath("//h1[contains(@class, 'kb-title')]"):
        return
    for heading in reversed(root.xpath("//h1|//h2|//h3|//h4|//h5")):
        if "kb-title" not in (heading.get("class") or ""):
            heading.tag = f"h{int(tag_of(heading)[1]) + 1}"


def convert_docx(data: bytes, file_name: str) -> tuple[str, str, list[str]]:
    """(Markdown, title suggestion, warnings) of a Word document; the zip was checked first (`zip_guard`)."""
    try:
        result = mammoth.convert_to_html(io.BytesIO(data), style_map=STYLE_MAP, include_embedded_style_map=False,
                                         convert_image=mammoth.images.img_element(_placeholder))
    except (KeyError, ValueError, zipfile.BadZipFile, etree.XMLSyntaxError, AttributeError, IndexError) as exc:
        raise DamagedDocumentRejected(f"{file_name} cannot be read as a Word document ({type(exc).__name__}: "
                                      f"{exc}): save it again from Word or LibreOffice and upload that") from None
    root = html.document_fromstring(f"<html><body>{result.value}</body></html>",
                                    parser=html.HTMLParser(encoding="utf-8", no_network=True))
    _shift_below_title(root)
    body = root.xpath("//body")[0]
    markdown = md.join_blocks(markdown_of(body))
    title = core_title(data) or next((md.clean_inline("".join(h.itertext())) for h in body.iter("h1", "h2")), "")
    warnings = [m.message for m in result.messages if m.type == "error"][:20]
    return markdown, title, warnings

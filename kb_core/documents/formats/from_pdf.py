"""PDF as Markdown through pypdfium2 (PDFium, the PDF engine of Chromium; Apache-2.0 / BSD-3): each page's
lines with the size, weight and pitch of their font, the ruled tables (`pdf_tables`) and the images, laid out
as Markdown by `pdf_layout`, the outline (bookmarks) giving the headings where the PDF has one.

Refused: a password-protected or encrypted PDF, one that ends before its end-of-file marker (truncated) or that
PDFium cannot open, and one with no text at all ("no text to index: OCR is not available": a scan is pages of
images). Pages that are only an image while others hold text are named in a warning. An image becomes a
placeholder, with its alternate text where the PDF is tagged.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections.abc import Callable

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from kb_core.documents.formats import markdown_out as md
from kb_core.documents.formats.pdf_layout import Line, Outline, PageItems, Placed, page_blocks, running_lines, style_of
from kb_core.documents.formats.pdf_tables import tables_of
from kb_core.errors import DamagedDocumentRejected, NoTextRejected, ProtectedDocumentRejected

ProgressFn = Callable[[int, int], None]
_EOF_WINDOW = 4096  # the end marker sits in the last bytes (writers may append a little after it)
_FIXED_PITCH = 1  # PDF font descriptor flag
# fixed-pitch fonts by name: the standard Courier is used without a descriptor that would say so
_MONO_NAMES = ("courier", "mono", "consolas", "menlo", "code", "fixed")
_MIN_IMAGE = 24.0  # points: smaller images are bullets, icons and rules
_IMAGE_ONLY = re.compile(r"!\[[^\]]*\]\(image\)")
_UNTITLED = ("untitled", "microsoft word - ", "powerpoint presentation", "slide 1")


def open_pdf(data: bytes, file_name: str) -> pdfium.PdfDocument:
    if b"%%EOF" not in data[-_EOF_WINDOW:]:
        raise DamagedDocumentRejected(f"{file_name} ends before the PDF's end-of-file marker: the file is truncated "
                                      "or damaged; upload the complete file")
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise ProtectedDocumentRejected(f"{file_name} is a password-protected (encrypted) PDF: remove the "
                                            "password, or print it to a new PDF, and upload that") from None
        raise DamagedDocumentRejected(f"{file_name} cannot be read as a PDF ({exc}): the file is damaged; save or "
                                      "export it again and upload that") from None


def outline_of(pdf: pdfium.PdfDocument) -> Outline:
    """Outline entries by page (depth from 1); none when the outline has fewer than two usable entries."""
    entries: dict[int, list[tuple[int, str]]] = {}
    count = 0
    for bookmark in pdf.get_toc(max_depth=md.MAX_HEADING):
        dest = bookmark.get_dest()
        title = md.clean_inline(bookmark.get_title() or "")
        index = dest.get_index() if dest is not None else None
        if title and index is not None and index >= 0:
            entries.setdefault(index, []).append((bookmark.level + 1, title))
            count += 1
    return Outline({k: tuple(v) for k, v in entries.items()} if count >= 2 else {})


def _font(textpage, index: int) -> tuple[float, bool, bool]:
    """(size as set on the page, bold, fixed pitch) of the character at `index`."""
    size = pdfium_c.FPDFText_GetFontSize(textpage, index)
    matrix = pdfium_c.FS_MATRIX()
    if pdfium_c.FPDFText_GetMatrix(textpage, index, matrix):  # a size of 1 scaled by the text matrix is common
        size *= math.hypot(matrix.c, matrix.d) or 1.0
    weight = pdfium_c.FPDFText_GetFontWeight(textpage, index)
    flags = ctypes.c_int(0)
    length = pdfium_c.FPDFText_GetFontInfo(textpage, index, None, 0, flags)
    name = ""
    if 0 < length <= 256:
        buffer = ctypes.create_string_buffer(length)
        pdfium_c.FPDFText_GetFontInfo(textpage, index, buffer, length, flags)
        name = buffer.value.decode("latin-1").lower()
    return float(size), weight >= 600, bool(flags.value & _FIXED_PITCH) or any(m in name for m in _MONO_NAMES)


def lines_of(textpage) -> list[Line]:
    """The page's text lines as PDFium orders them, with where they start and the font they start in."""
    text = textpage.get_text_range()
    x, y = ctypes.c_double(), ctypes.c_double()
    found = []
    offset = 0
    for raw_line in text.splitlines(keepends=True):
        line = raw_line.rstrip("\r\n")
        start = offset + (len(line) - len(line.lstrip()))
        end = offset + len(line.rstrip()) - 1
        offset += len(raw_line)
        if not line.strip():
            continue
        first = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, start)
        last = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, end)
        if first < 0 or not pdfium_c.FPDFText_GetCharOrigin(textpage, first, x, y):
            continue
        size, bold, mono = _font(textpage, first)
        bold_end = last >= 0 and pdfium_c.FPDFText_GetFontWeight(textpage, last) >= 600
        text = line.replace("\ufffe", "-")  # PDFium's mark for a hyphen that ended a line
        found.append(Line(text, x.value, y.value, size, bold and bold_end, mono))
    return found


def _images(page, alts: list[str]) -> list[Placed]:
    placed = []
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
        left, bottom, right, top = obj.get_bounds()
        if right - left >= _MIN_IMAGE and top - bottom >= _MIN_IMAGE:
            placed.append(Placed(top, md.image(alts.pop(0) if alts else "")))
    return placed


def figure_alts(page) -> list[str]:
    """The alternate texts of a tagged page's figures, in order (empty for an untagged PDF)."""
    tree = pdfium_c.FPDF_StructTree_GetForPage(page.raw)
    if not tree:
        return []
    found: list[str] = []
    try:
        stack = [pdfium_c.FPDF_StructTree_GetChildAtIndex(tree, i)
                 for i in reversed(range(pdfium_c.FPDF_StructTree_CountChildren(tree)))]
        while stack and len(found) < 500:
            element = stack.pop()
            if not element:
                continue
            if _struct_text(pdfium_c.FPDF_StructElement_GetType, element) == "Figure":
                found.append(_struct_text(pdfium_c.FPDF_StructElement_GetAltText, element))
            stack += [pdfium_c.FPDF_StructElement_GetChildAtIndex(element, i)
                      for i in reversed(range(max(pdfium_c.FPDF_StructElement_CountChildren(element), 0)))]
    finally:
        pdfium_c.FPDF_StructTree_Close(tree)
    return found


def _struct_text(getter, element) -> str:
    size = getter(element, None, 0)
    if size <= 2:
        return ""
    buffer = ctypes.create_string_buffer(size)
    getter(element, buffer, size)
    return buffer.raw[:size - 2].decode("utf-16-le", errors="ignore")


def read_page(pdf: pdfium.PdfDocument, index: int) -> tuple[PageItems, bool]:
    """One page's lines (outside its tables), tables and images; and whether it is only images."""
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        tables = tables_of(page, textpage)
        lines = [line for line in lines_of(textpage) if not any(t.holds(line.x, line.y) for t in tables)]
        images = _images(page, figure_alts(page))
        only_images = bool(images) and not tables and not any(line.text.strip() for line in lines)
        placed = tuple(Placed(t.top, t.markdown) for t in tables) + tuple(images)
        return PageItems(tuple(lines), placed), only_images
    finally:
        textpage.close()
        page.close()


def title_property(pdf: pdfium.PdfDocument) -> str:
    title = md.clean_inline(pdf.get_metadata_dict().get("Title", "") or "")
    lowered = title.lower()
    if not title or lowered.startswith(_UNTITLED) or lowered.endswith((".doc", ".docx", ".pdf", ".tex", ".dvi")):
        return ""
    return title


def convert_pdf(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    """(Markdown, title suggestion, warnings, pages) of a PDF."""
    pdf = open_pdf(data, file_name)
    try:
        count = len(pdf)
        outline = outline_of(pdf)
        pages: list[PageItems] = []
        scanned: list[int] = []
        for index in range(count):
            items, only_images = read_page(pdf, index)
            pages.append(items)
            if only_images:
                scanned.append(index + 1)
            progress(index + 1, count)
        title = title_property(pdf)
    finally:
        pdf.close()
    style, running = style_of(pages), running_lines(pages)
    blocks = [block for index, page in enumerate(pages) for block in page_blocks(page, style, outline, index, running)]
    if not any(_IMAGE_ONLY.sub("", block).strip() for block in blocks):
        reason = "its pages are images, as a scan is" if scanned or blocks else "it holds no text"
        raise NoTextRejected(f"{file_name}: no text to index: OCR is not available ({reason}); upload a PDF with "
                             "a text layer, or the document it was made from")
    warnings = []
    if scanned:
        listed = ", ".join(map(str, scanned[:10])) + (" and more" if len(scanned) > 10 else "")
        warnings.append(f"pages {listed} are only images (no text layer; OCR is not available): their content is "
                        "not in the rendition")
    return md.join_blocks(blocks), title, warnings, count

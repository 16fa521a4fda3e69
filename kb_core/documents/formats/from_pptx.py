"""PowerPoint decks (.pptx) as Markdown, through python-pptx: the deck's title as `# `, one `## ` per slide
(its title, or "Slide N" when it has none), then the slide's shapes in reading order (top to bottom, then left to
right): text as paragraphs, the body placeholders' paragraphs as bulleted (or numbered) lists by their level,
tables as Markdown tables, pictures as placeholders with their description, groups opened; the speaker notes
last, quoted after "Notes:".

A first slide whose title is the deck's title is the `# ` section itself. The title suggestion is the core
property `dc:title`, else the first slide's title. Charts, SmartArt and media are left out (a warning says so).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterator

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.exc import InvalidXmlError, PackageNotFoundError

from kb_core.documents.formats import markdown_out as md
from kb_core.errors import DamagedDocumentRejected

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_TITLES = (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE)
_BODIES = (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY,
           PP_PLACEHOLDER.VERTICAL_OBJECT)
_UNTITLED = {"", "powerpoint presentation", "presentation", "slide 1", "untitled"}
# slide furniture the layout repeats on every slide
_FURNITURE = (PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.HEADER)
_IMAGE_FILE = re.compile(r"(?:^[a-z]:\\|[\\/]|\.(?:png|jpe?g|gif|bmp|tiff?|emf|wmf|svg)$)", re.IGNORECASE)
ProgressFn = Callable[[int, int], None]


def _position(shape) -> tuple[int, int]:
    return (shape.top or 0) // 91440 if shape.top is not None else 0, shape.left or 0  # rows of 0.1 inch


def _ordered(shapes) -> list:
    return sorted(shapes, key=_position)


def _placeholder_type(shape):
    try:
        return shape.placeholder_format.type if shape.is_placeholder else None
    except ValueError:
        return None


def _bullet(paragraph) -> str | None:
    """"number" or "bullet" when a paragraph says so itself; None when it inherits (or says none)."""
    properties = paragraph._p.pPr
    if properties is None:
        return None
    if properties.find(f"{_A}buAutoNum") is not None:
        return "number"
    if properties.find(f"{_A}buChar") is not None:
        return "bullet"
    return "none" if properties.find(f"{_A}buNone") is not None else None


def _text_blocks(shape, in_body: bool) -> Iterator[str]:
    """A text frame's paragraphs: list items in a body placeholder (or where bullets are set), else paragraphs."""
    items: list[str] = []
    numbers: dict[int, int] = {}
    for paragraph in shape.text_frame.paragraphs:
        text = md.clean_inline("".join(run.text for run in paragraph.runs) or paragraph.text)
        if not text:
            continue
        bullet = _bullet(paragraph) or ("bullet" if in_body else "none")
        if bullet == "none":
            if items:
                yield "\n".join(items)
                items = []
            yield md.paragraph(text)
            continue
        level = min(paragraph.level, 8)
        number = None
        if bullet == "number":
            number = numbers[level] = numbers.get(level, 0) + 1
        items.append(md.list_item(text, depth=level, number=number))
    if items:
        yield "\n".join(items)


def _picture_alt(shape) -> str:
    properties = shape._element.find(".//{*}cNvPr")
    if properties is None:
        return ""
    alt = (properties.get("descr") or properties.get("title") or "").strip()
    return "" if _IMAGE_FILE.search(alt) else alt  # PowerPoint writes the inserted file's path as description


def _shape_blocks(shape, warnings: list[str], slide_number: int) -> Iterator[str]:
    kind = shape.shape_type
    if kind == MSO_SHAPE_TYPE.GROUP:
        for inner in _ordered(shape.shapes):
            yield from _shape_blocks(inner, warnings, slide_number)
    elif getattr(shape, "has_table", False) and shape.has_table:
        yield md.table([[cell.text for cell in row.cells] for row in shape.table.rows])
    elif kind == MSO_SHAPE_TYPE.PICTURE or (kind == MSO_SHAPE_TYPE.PLACEHOLDER and hasattr(shape, "image")):
        yield md.image(_picture_alt(shape))
    elif getattr(shape, "has_chart", False) and shape.has_chart:
        chart = shape.chart
        title = chart.chart_title.text_frame.text if chart.has_title and chart.chart_title.has_text_frame else ""
        yield md.image(f"chart: {title}" if title else "chart")
    elif shape.has_text_frame:
        yield from _text_blocks(shape, _placeholder_type(shape) in _BODIES)
    elif kind in (MSO_SHAPE_TYPE.MEDIA, MSO_SHAPE_TYPE.EMBEDDED_OLE_OBJECT) or shape._element.find(
            ".//{*}relIds") is not None:
        warnings.append(f"slide {slide_number}: a {'diagram' if kind is None else str(kind).lower()} was left out")


def _slide_title(slide) -> tuple[object | None, str]:
    """The title placeholder and its text; without one, the topmost text shape holding one short line."""
    for shape in slide.shapes:
        if _placeholder_type(shape) in _TITLES and shape.has_text_frame:
            return shape, md.clean_inline(shape.text_frame.text)
    texts = [s for s in _ordered(slide.shapes) if s.has_text_frame and s.text_frame.text.strip()
             and _placeholder_type(s) not in _FURNITURE]
    if texts:
        lines = [line for line in texts[0].text_frame.text.splitlines() if line.strip()]
        if len(lines) == 1 and len(lines[0]) <= 80:
            return texts[0], md.clean_inline(lines[0])
    return None, ""


def _notes(slide) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return md.clean_inline(frame.text) if frame is not None else ""


def _slide_blocks(slide, number: int, deck_title: str, warnings: list[str]) -> list[str]:
    title_shape, title = _slide_title(slide)
    blocks = [] if number == 1 and title and title == deck_title else [md.heading(2, title or f"Slide {number}")]
    for shape in _ordered(slide.shapes):
        if (title_shape is None or shape.shape_id != title_shape.shape_id) \
                and _placeholder_type(shape) not in _FURNITURE:
            try:
                blocks.extend(_shape_blocks(shape, warnings, number))
            except (InvalidXmlError, KeyError, ValueError, AttributeError) as exc:  # one broken shape, not the deck
                warnings.append(f"slide {number}: a shape that cannot be read was left out ({exc})"[:300])
    notes = _notes(slide)
    if notes:
        blocks.append(md.quote(md.paragraph(f"Notes: {notes}")))  # the speaker's aside, not the slide
    return blocks


def convert_pptx(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    """(Markdown, title suggestion, warnings, slides) of a deck; the zip was checked first (`zip_guard`)."""
    try:
        deck = Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, etree.XMLSyntaxError) as exc:
        raise DamagedDocumentRejected(f"{file_name} cannot be read as a PowerPoint deck ({type(exc).__name__}: "
                                      f"{exc}): save it again from PowerPoint or LibreOffice and upload that") from None
    property_title = md.clean_inline(deck.core_properties.title or "")
    first_title = _slide_title(slides[0])[1] if slides else ""
    deck_title = property_title if property_title.lower() not in _UNTITLED else first_title
    warnings: list[str] = []
    blocks = [md.heading(1, deck_title)] if deck_title else []
    for number, slide in enumerate(slides, start=1):
        blocks += _slide_blocks(slide, number, deck_title, warnings)
        progress(number, len(slides))
    return md.join_blocks(blocks), deck_title, warnings[:20], len(slides)

"""The converter of each kind, as the child process runs it: `convert_here(kind, data, file_name, progress)`
-> the fields of a rendition that only the converter knows (Markdown, the title property, warnings, pages),
as plain JSON values. Each converter's library is imported by its kind alone, so a PDF child never loads
python-pptx. `sandbox` runs this in the child; tests may run it here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kb_core.documents.formats.kinds import Kind

ProgressFn = Callable[[int, int], None]


def _pdf(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    from kb_core.documents.formats.from_pdf import convert_pdf

    return convert_pdf(data, file_name, progress)


def _docx(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    from kb_core.documents.formats.from_docx import convert_docx
    from kb_core.documents.formats.zip_guard import check_zip

    check_zip(data, file_name)
    markdown, title, warnings = convert_docx(data, file_name)
    return markdown, title, warnings, 0


def _pptx(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    from kb_core.documents.formats.from_pptx import convert_pptx
    from kb_core.documents.formats.zip_guard import check_zip

    check_zip(data, file_name)
    return convert_pptx(data, file_name, progress)


def _html(data: bytes, file_name: str, progress: ProgressFn) -> tuple[str, str, list[str], int]:
    from kb_core.documents.formats.from_html import convert_html

    markdown, title = convert_html(data, file_name)
    return markdown, title, [], 0


_CONVERTERS = {Kind.PDF: _pdf, Kind.DOCX: _docx, Kind.PPTX: _pptx, Kind.HTML: _html}


def convert_here(kind: str, data: bytes, file_name: str, progress: ProgressFn) -> dict[str, Any]:
    """What the converter of `kind` makes of `data`, in this process (no limits but the caller's)."""
    markdown, title, warnings, pages = _CONVERTERS[Kind(kind)](data, file_name, progress)
    return {"markdown": markdown, "title": title, "warnings": list(warnings), "pages": pages}

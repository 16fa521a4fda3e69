"""What a file is, decided by its bytes: `sniff(data, file_name) -> Kind`.

The name's extension is a hint only: a Word file named `.pdf` is a Word file (`convert` says so in a warning),
a zip that is no Word or PowerPoint file is refused whatever it is called, and so is binary content of no known
type. Text is valid UTF-8 (a BOM allowed) or UTF-16 with its BOM, without NUL characters; it is HTML when it
opens (after a BOM, whitespace and comments) with a doctype, `<html>` or `<head>` - but a `.md` file stays
Markdown, since real Markdown pages open with `<head>` blocks too. An HTML page may be in another charset than
UTF-8 (its own declaration names it); plain text must be UTF-8.
"""

from __future__ import annotations

import io
import re
import zipfile
from enum import StrEnum
from pathlib import PurePosixPath

from kb_core.documents.formats.zip_guard import check_members
from kb_core.errors import DamagedDocumentRejected, UnsupportedFormatRejected


class Kind(StrEnum):
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    HTML = "html"
    TEXT = "text"
    MARKDOWN = "markdown"


# what each kind is called in a message, and the extensions that name it
LABELS = {Kind.PDF: "a PDF", Kind.DOCX: "a Word document", Kind.PPTX: "a PowerPoint deck", Kind.HTML: "an HTML page",
          Kind.TEXT: "a text file", Kind.MARKDOWN: "a Markdown file"}
EXTENSIONS = {Kind.PDF: (".pdf",), Kind.DOCX: (".docx",), Kind.PPTX: (".pptx",), Kind.HTML: (".html", ".htm"),
              Kind.TEXT: (".txt", ".text", ".log"), Kind.MARKDOWN: (".md", ".markdown")}

_PDF_WINDOW = 1024  # the header may follow some junk; readers look this far
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # .doc/.ppt/.xls, and also a password-protected .docx/.pptx
# (signature, what it is) of binary types people upload by mistake
_REFUSED_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"), (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"), (b"Rar!", "a RAR archive"), (b"{\\rtf", "an RTF document"),
    (b"\x7fELF", "a program"), (b"MZ", "a program"),
)
# a doctype, <html> or <head> opening the text, after comments and an XML declaration
_HTML_START = re.compile(r"\A(?:\s|<!--.*?-->|<\?xml[^>]*\?>)*<(?:!doctype\s+html|html|head)[\s>]",
                         re.IGNORECASE | re.DOTALL)
_HTML_PROBE = 4096  # characters looked at for the start of an HTML page
_NEEDS_OCR = "no text to index: OCR is not available"


def extension(file_name: str) -> str:
    return PurePosixPath(file_name.replace("\\", "/")).suffix.lower()


def sniff(data: bytes, file_name: str) -> Kind:
    """The kind of `data`, decided by its content; raises `UnsupportedFormatRejected` (saying what it seems to
    be) for anything kb_core does not convert."""
    if not data:
        raise UnsupportedFormatRejected(f"{file_name} is empty: there is nothing to index")
    if b"%PDF-" in data[:_PDF_WINDOW]:
        return Kind.PDF
    if data.startswith(b"PK\x03\x04") or data.startswith(b"PK\x05\x06"):
        return _zip_kind(data, file_name)
    if data.startswith(_OLE2):
        raise UnsupportedFormatRejected(
            f"{file_name} is an old binary Office file (.doc, .ppt, .xls) or a password-protected Office file: "
            "save it as .docx or .pptx without a password and upload that")
    text = decode_text(data)
    if text is None and b"\x00" not in data[:_HTML_PROBE] and _HTML_START.match(data[:_HTML_PROBE].decode("latin-1")):
        return Kind.HTML  # a page in its own charset (windows-1252, Shift_JIS): the parser reads its declaration
    if text is None:
        for magic, what in _REFUSED_MAGIC:
            if data.startswith(magic):
                hint = f" ({_NEEDS_OCR})" if what.endswith("image") else ""
                raise UnsupportedFormatRejected(f"{file_name} is {what}: kb_core takes PDF, Word (.docx), "
                                                f"PowerPoint (.pptx), HTML, Markdown and text files{hint}")
        raise UnsupportedFormatRejected(
            f"{file_name} is binary content of no type kb_core converts (nor UTF-8 text): upload a PDF, Word "
            "(.docx), PowerPoint (.pptx), HTML, Markdown or UTF-8 text file")
    named = extension(file_name)
    if text.startswith("{\\rtf"):
        raise UnsupportedFormatRejected(f"{file_name} is an RTF document: save it as .docx or PDF and upload that")
    if named in EXTENSIONS[Kind.MARKDOWN]:
        return Kind.MARKDOWN
    probe = text[:_HTML_PROBE]
    if _HTML_START.match(probe) or (named in EXTENSIONS[Kind.HTML] and probe.lstrip().startswith("<")):
        return Kind.HTML
    return Kind.TEXT


def decode_text(data: bytes) -> str | None:
    """`data` as text: UTF-8 (with or without a BOM) or UTF-16 with its BOM, holding no NUL; else None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
    return None if "\x00" in text else text


def _zip_kind(data: bytes, file_name: str) -> Kind:
    """DOCX or PPTX by the members an Office Open XML package must hold; any other zip refused."""
    check_members(data, file_name)  # before zipfile reads a directory of any size
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DamagedDocumentRejected(f"{file_name} is a damaged or truncated zip (a Word or PowerPoint file "
                                      f"is one): {exc}; upload the complete file") from None
    if "[Content_Types].xml" in names:
        if "word/document.xml" in names:
            return Kind.DOCX
        if "ppt/presentation.xml" in names:
            return Kind.PPTX
        if "xl/workbook.xml" in names:
            raise UnsupportedFormatRejected(f"{file_name} is an Excel workbook, which kb_core does not convert "
                                            "yet: save the sheets you need as a PDF or HTML table")
    raise UnsupportedFormatRejected(f"{file_name} is a zip archive, not a Word (.docx) or PowerPoint (.pptx) "
                                    "file: upload the documents inside it one by one")


def mismatch_warning(kind: Kind, file_name: str) -> str | None:
    """A warning when the name says another type than the content is (`a.pdf` holding a Word document)."""
    named = extension(file_name)
    if not named or kind in (Kind.TEXT, Kind.MARKDOWN) and named not in _ALL_EXTENSIONS:
        return None
    if named in EXTENSIONS[kind] or (kind is Kind.TEXT and named not in _ALL_EXTENSIONS):
        return None
    return f"{file_name} is named {named} but is {LABELS[kind]}: it was converted as {LABELS[kind]}"


_ALL_EXTENSIONS = {ext for names in EXTENSIONS.values() for ext in names}

"""`convert(data, file_name) -> Rendition`: a PDF, Word, PowerPoint, HTML or text file as Markdown, with the
suggestions a curator accepts or edits. The public face of the package (`sniff` is in `kinds`).

The kind is sniffed from the bytes; Markdown and plain text pass through as they are (decoded: nothing to
convert, no library runs); the other kinds are converted in a child process with a memory and a time limit
(`sandbox`). A refusal is a `ConversionRejected` (or a `DocumentError` at step "convert" when the converter
process cannot start): nothing was written anywhere, there is nothing to undo.

`converter_version(kind)` names the converter and its library's version: a rendition made under another one
is stale and is made again from its original.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import metadata

from kb_core.documents.formats import suggest
from kb_core.documents.formats.kinds import Kind, decode_text, mismatch_warning, sniff
from kb_core.documents.formats.sandbox import ChildAnswer, ChildLimits, run_child
from kb_core.errors import ConversionLimitRejected, DamagedDocumentRejected, NoTextRejected
from kb_core.progress import Progress, no_progress

log = logging.getLogger(__name__)

# Bumped when a converter of this package changes what it writes, so that every rendition is made again.
FORMAT_VERSION = 1
_LIBRARIES = {Kind.PDF: ("pypdfium2",), Kind.DOCX: ("mammoth", "lxml"), Kind.PPTX: ("python-pptx", "lxml"),
              Kind.HTML: ("lxml",), Kind.TEXT: (), Kind.MARKDOWN: ()}
STAGE = "converting"


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 300  # the child's address space
    seconds: float = 60.0  # wall clock and processor time, each
    max_markdown_chars: int = 16_000_000  # a rendition larger than this is no document to index


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Rendition:
    markdown: str
    kind: Kind
    title: str  # suggestions, for the curator to accept
    summary: str
    keyword_candidates: tuple[str, ...]
    converter_version: str
    warnings: tuple[str, ...] = ()
    pages: int = 0  # pages or slides, where the kind has them


@dataclass(frozen=True)
class Measured:
    """A conversion and what it cost (the benchmark's view)."""

    rendition: Rendition
    seconds: float
    peak_rss_bytes: int  # of the converter's child process; 0 for what converts in this process
    child: bool = field(default=True)


def converter_version(kind: Kind) -> str:
    """`kb-formats/1 pdf pypdfium2-5.15.2`: changes with this package's converters and their libraries."""
    parts = [f"kb-formats/{FORMAT_VERSION}", str(kind)]
    for distribution in _LIBRARIES[kind]:
        try:
            parts.append(f"{distribution}-{metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{distribution}-missing")
    return " ".join(parts)


def convert(data: bytes, file_name: str, *, progress: Progress = no_progress,
            limits: Limits = DEFAULT_LIMITS) -> Rendition:
    """The rendition of `data`; raises a `ConversionRejected` saying why when it cannot be made."""
    return measure(data, file_name, progress=progress, limits=limits).rendition


def measure(data: bytes, file_name: str, *, progress: Progress = no_progress,
            limits: Limits = DEFAULT_LIMITS) -> Measured:
    kind = sniff(data, file_name)
    warnings = [w for w in (mismatch_warning(kind, file_name),) if w]
    if kind in (Kind.TEXT, Kind.MARKDOWN):
        text = (decode_text(data) or "").replace("\r\n", "\n").replace("\r", "\n")
        body = {"markdown": text if text.endswith("\n") or not text else text + "\n", "title": "", "warnings": [],
                "pages": 0}
        answer = ChildAnswer(body, 0.0, 0)
    else:
        answer = run_child(str(kind), data, file_name, ChildLimits(limits.memory_mb, limits.seconds),
                           lambda done, total: progress(STAGE, done, total))
    rendition = _rendition(kind, answer.body, file_name, warnings, limits)
    log.info("converted %s (%s, %d pages) to %d characters of Markdown in %.2f s", file_name, kind,
             rendition.pages, len(rendition.markdown), answer.seconds)
    return Measured(rendition, answer.seconds, answer.peak_rss_kb * 1024, kind not in (Kind.TEXT, Kind.MARKDOWN))


def _field(body: dict, name: str, kind: type, file_name: str):
    value = body.get(name)
    if type(value) is not kind:
        raise DamagedDocumentRejected(f"the converter of {file_name} answered without a usable {name}: nothing "
                                      "was written")
    return value


def _rendition(kind: Kind, body: dict, file_name: str, warnings: list[str], limits: Limits) -> Rendition:
    markdown = _field(body, "markdown", str, file_name)
    title = _field(body, "title", str, file_name)
    pages = _field(body, "pages", int, file_name)
    said = _field(body, "warnings", list, file_name)
    warnings += [w[:500] for w in said if isinstance(w, str)][:20]
    if len(markdown) > limits.max_markdown_chars:
        raise ConversionLimitRejected(f"{file_name} holds {len(markdown):,} characters of text, more than the "
                                      f"{limits.max_markdown_chars:,} a document may have: split it into smaller "
                                      "files", limit="output")
    if not markdown.strip():
        raise NoTextRejected(f"{file_name}: no text to index: the file holds no text (an image-only document "
                             "would need OCR, which is not available)")
    return Rendition(markdown=markdown, kind=kind, title=suggest.title_suggestion(markdown, title),
                     summary=suggest.summary_suggestion(markdown),
                     keyword_candidates=suggest.keyword_candidates(markdown),
                     converter_version=converter_version(kind), warnings=tuple(warnings), pages=pages)

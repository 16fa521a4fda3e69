"""Upload preview: what a file would become, and what a curator should fix before it goes in. Pure reads."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kb_core.documents.chunking import MAX_INDEXED_CHARS, chunk_document
from kb_core.documents.folder import decode_markdown
from kb_core.documents.frontmatter import Frontmatter, FrontmatterError, parse_frontmatter_strict, parse_sections
from kb_core.documents.language import translation_key
from kb_core.documents.path_rule import validate_category, validate_file_name
from kb_core.documents.sections import MAX_HEADINGS, MAX_NAMED, outline
from kb_core.errors import KnowledgeBaseError
from kb_core.keywords.entry import IndexedDocuments, split_keywords

ERROR, WARNING, INFO = "error", "warning", "info"
# Below this many characters no cap of chunking or of the heading scan can be reached (2,001 headings take
# 8,004: `# a` and a line break each): shorter documents are not chunked by the preview.
_CAPS_FROM_CHARS = 8 * 1024


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" blocks the upload; "warning" and "info" do not
    message: str


@dataclass(frozen=True)
class UploadPreview:
    file_name: str
    category: str
    file_path: str | None
    frontmatter: Frontmatter | None
    findings: tuple[Finding, ...]
    replaces_existing: bool
    sha256: str = ""  # of the uploaded bytes
    current_sha256: str | None = None  # of the file it replaces: pass it as `upload(..., if_match=...)`

    @property
    def can_upload(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)


def preview_upload(index: IndexedDocuments, file_name: str, data: bytes, category: str) -> UploadPreview:
    preview = inspect_upload(index, file_name, data, category)
    page = page_of(preview)
    return replace(preview, findings=preview.findings + keyword_clashes(
        preview, lambda keyword: [p for p in index.claimants(keyword, page=page) if p != preview.file_path]))


def page_of(preview: UploadPreview) -> str:
    """The translation group an upload joins ("" for none): its other language versions are no clash."""
    if preview.file_path is None:
        return ""
    return translation_key(f"{preview.category}/{preview.file_name}",
                           preview.frontmatter.extra if preview.frontmatter else None)


def inspect_upload(
    index: IndexedDocuments, file_name: str, data: bytes, category: str, *, check_category: bool = True
) -> UploadPreview:
    """Everything about one file except keyword clashes (its size limit is the folder's `max_bytes`, so the
    preview refuses what the upload would). With `check_category=False` an invalid category is
    left to the caller (a batch reports it once), and the file's other problems are still found."""
    findings: list[Finding] = []
    name = file_name
    digest = hashlib.sha256(bytes(data)).hexdigest() if isinstance(data, (bytes, bytearray)) else ""
    try:
        name = validate_file_name(file_name)
    except KnowledgeBaseError as exc:
        findings.append(Finding(ERROR, str(exc)))
    category_ok = True
    try:
        validate_category(category)
    except KnowledgeBaseError as exc:
        category_ok = False
        if check_category:
            findings.append(Finding(ERROR, str(exc)))
    target = None
    if category_ok and not findings:
        try:  # the path rule as the upload applies it: the whole path's length, links in the way
            _path, target = index.folder.target(category, name)
        except KnowledgeBaseError as exc:
            findings.append(Finding(ERROR, str(exc)))
    try:
        text = decode_markdown(data, max_bytes=index.folder.max_bytes, file_name=name)
    except KnowledgeBaseError as exc:
        findings.append(Finding(ERROR, str(exc)))
        text = None
    if findings or text is None:
        return UploadPreview(name, category, None, None, tuple(findings), False, digest)

    file_path = current = None
    replaces = False
    if target is not None:
        file_path = index.folder.display_path(f"{category}/{name}")
        replaces = target.exists()
        try:
            existing = index.folder.current_bytes(target)
            current = hashlib.sha256(existing).hexdigest() if existing is not None else None
        except OSError as exc:
            findings.append(Finding(ERROR, f"cannot read the existing {file_path}: {exc}"))
        if current == digest:
            findings.append(Finding(INFO, f"identical to the indexed {file_path}: nothing to do"))
        elif replaces:
            findings.append(Finding(INFO, f"replaces the existing {file_path}"))
    fm = None
    try:
        fm = parse_frontmatter_strict(text)
        if fm is None:
            findings.append(Finding(WARNING, "no frontmatter: L0 will not know this document; only L1 can find it"))
    except FrontmatterError as exc:
        findings.append(Finding(WARNING, f"malformed frontmatter ({exc}): only L1 will find this document"))
    findings.extend(_size_findings(text))
    if fm is not None:
        missing = [field for field in ("title", "keywords", "summary") if not getattr(fm, field)]
        if missing:
            findings.append(Finding(WARNING, "missing required field(s): " + ", ".join(missing)))
        _kept, ignored = split_keywords(fm.keywords)
        for keyword, reason in ignored:
            findings.append(Finding(WARNING, f"keyword “{keyword}” is ignored by L0: {reason}"))
        findings.extend(_section_findings(fm, text or ""))
    return UploadPreview(name, category, file_path, fm, tuple(findings), replaces, digest, current)


AMBIGUOUS_PREFIX = "L0 will be ambiguous for: "
NAMED_CLAIMANTS = 5  # the other documents an ambiguity warning names; the rest are counted


def ambiguity_warning(keyword: str, others: Sequence[str]) -> Finding:
    """The warning that L0 would find `keyword` in `others` too: the first few named, the rest counted (a
    generic keyword of a real tree is in hundreds of pages: a wall of paths helps nobody)."""
    named = ", ".join(others[:NAMED_CLAIMANTS])
    rest = len(others) - NAMED_CLAIMANTS
    return Finding(WARNING, f"{AMBIGUOUS_PREFIX}{keyword} — also in {named}"
                            + (f" and {rest:,} more" if rest > 0 else ""))


def keyword_clashes(preview: UploadPreview, others_of: Callable[[str], list[str]]) -> tuple[Finding, ...]:
    """One warning per keyword L0 would find in other documents too (`others_of(keyword)`: their paths)."""
    if preview.frontmatter is None:
        return ()
    kept, _ignored = split_keywords(preview.frontmatter.keywords)
    found = []
    for keyword in kept:
        others = others_of(keyword)
        if others:
            found.append(ambiguity_warning(keyword, others))
    return tuple(found)


def _size_findings(text: str) -> list[Finding]:
    """What of a long document L1 and the section list leave out (the caps of `chunking` and `sections`)."""
    if len(text) < _CAPS_FROM_CHARS:
        return []
    shape = chunk_document(text)
    findings = []
    if not shape.complete:
        findings.append(Finding(WARNING, f"long document: full-text and semantic search (L1) index its first "
                                         f"{len(shape.chunks):,} chunks ({shape.indexed_chars:,} characters; at most "
                                         f"{MAX_INDEXED_CHARS:,}); the rest is found through its keywords (L0) and "
                                         "its sections"))
    if not shape.all_headings:
        findings.append(Finding(WARNING, f"more than {MAX_HEADINGS:,} headings: later headings are read as text "
                                         "(not listed in availableSections, not served by section_title)"))
    return findings


def _section_findings(fm: Frontmatter, text: str) -> list[Finding]:
    """Frontmatter `sections` an agent could not use: a malformed value, or a heading the body lacks."""
    findings = [Finding(WARNING, problem) for problem in parse_sections(fm.extra.get("sections"))[1]]
    if len(fm.sections) > MAX_NAMED:
        findings.append(Finding(WARNING, f"{len(fm.sections)} `sections` are named: the first {MAX_NAMED} are used"))
    if fm.sections:
        for name in outline(text, fm.sections).missing:
            heading = dict(fm.sections)[name]
            findings.append(Finding(WARNING, f"section “{name}” points at “{heading}”, which is not a heading of "
                                             "this document: it is left out of availableSections"))
    return findings

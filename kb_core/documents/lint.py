"""Upload preview: what a file would become, and what a curator should fix before it goes in. Pure reads."""

from __future__ import annotations

from dataclasses import dataclass

from kb_core.documents.frontmatter import Frontmatter, FrontmatterError, parse_frontmatter_strict, parse_sections
from kb_core.documents.sections import outline
from kb_core.documents.validation import decode_markdown, validate_category, validate_file_name
from kb_core.errors import KnowledgeBaseError
from kb_core.retrieval.keyword_index import KnowledgeIndex, split_keywords

ERROR, WARNING, INFO = "error", "warning", "info"


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

    @property
    def can_upload(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)


def preview_upload(
    index: KnowledgeIndex, file_name: str, data: bytes, category: str, *, max_bytes: int
) -> UploadPreview:
    findings: list[Finding] = []
    name = file_name
    try:
        name = validate_file_name(file_name)
    except KnowledgeBaseError as exc:
        findings.append(Finding(ERROR, str(exc)))
    try:
        validate_category(category)
    except KnowledgeBaseError as exc:
        findings.append(Finding(ERROR, str(exc)))
    try:
        text = decode_markdown(data, max_bytes=max_bytes, file_name=name)
    except KnowledgeBaseError as exc:
        findings.append(Finding(ERROR, str(exc)))
        text = None
    if findings:
        return UploadPreview(name, category, None, None, tuple(findings), False)

    file_path = index.display_path(f"{category}/{name}")
    replaces = (index.base_dir / category / name).exists()
    if replaces:
        findings.append(Finding(INFO, f"replaces the existing {file_path}"))
    fm = None
    try:
        fm = parse_frontmatter_strict(text or "")
        if fm is None:
            findings.append(Finding(WARNING, "no frontmatter: L0 will not know this document; only L1 can find it"))
    except FrontmatterError as exc:
        findings.append(Finding(WARNING, f"malformed frontmatter ({exc}): only L1 will find this document"))
    if fm is not None:
        missing = [field for field in ("title", "keywords", "summary") if not getattr(fm, field)]
        if missing:
            findings.append(Finding(WARNING, "missing required field(s): " + ", ".join(missing)))
        kept, ignored = split_keywords(fm.keywords)
        for keyword, reason in ignored:
            findings.append(Finding(WARNING, f"keyword “{keyword}” is ignored by L0: {reason}"))
        for keyword in kept:
            others = [p for p in index.claimants(keyword) if p != file_path]
            if others:
                findings.append(Finding(WARNING, f"L0 will be ambiguous for: {keyword} — also in {', '.join(others)}"))
        findings.extend(_section_findings(fm, text or ""))
    return UploadPreview(name, category, file_path, fm, tuple(findings), replaces)


def _section_findings(fm: Frontmatter, text: str) -> list[Finding]:
    """Frontmatter `sections` an agent could not use: a malformed value, or a heading the body lacks."""
    findings = [Finding(WARNING, problem) for problem in parse_sections(fm.extra.get("sections"))[1]]
    if fm.sections:
        for name in outline(text, fm.sections).missing:
            heading = dict(fm.sections)[name]
            findings.append(Finding(WARNING, f"section “{name}” points at “{heading}”, which is not a heading of "
                                             "this document: it is left out of availableSections"))
    return findings

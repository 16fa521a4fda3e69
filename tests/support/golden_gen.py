"""Regenerate golden expectations: python tests/support/golden_gen.py (review the diff before committing)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: `support.format_files`
from kb_core.documents.chunking import chunk_markdown  # noqa: E402
from kb_core.documents.cleaning import clean_document  # noqa: E402
from kb_core.documents.formats.convert import convert  # noqa: E402
from kb_core.documents.frontmatter import parse_frontmatter  # noqa: E402
from kb_core.documents.frontmatter_edit import edit_frontmatter  # noqa: E402
from kb_core.documents.sections import body_text, document_sections, outline  # noqa: E402
from support.format_files import SAMPLES  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = TESTS / "golden" / "frontmatter"
GOLDEN_SECTIONS = TESTS / "golden" / "sections"
# Documents shaped like generated docs: `x.md` -> `x.expected.md` (what an answer and the Content tab show) and
# `x.sections.json` (the section parser's view and the chunks' heading paths, all from the one cleaning rule)
GOLDEN_CLEANING = TESTS / "golden" / "cleaning"
# In-place frontmatter edits: `x.in.md` + `x.edit.json` (the fields to set: title, summary, keywords, sections)
# or `x.keywords.json` (a keyword list, the keyword map's edit) -> `x.out.md`, byte for byte
GOLDEN_EDITS = TESTS / "golden" / "keyword_edit"
# Documents in other formats, made at test time (`support.format_files.SAMPLES`): `case.expected.md` (the
# rendition's Markdown) and `case.suggestions.json` (kind, title, summary, keyword candidates, warnings)
GOLDEN_FORMATS = TESTS / "golden" / "formats"


def rendition_for(case: str) -> tuple[str, dict]:
    """The rendition of a format sample: its Markdown and what it suggests."""
    name, make = SAMPLES[case]
    rendition = convert(make(), name)
    return rendition.markdown, {"kind": str(rendition.kind), "title": rendition.title, "summary": rendition.summary,
                                "keyword_candidates": list(rendition.keyword_candidates),
                                "warnings": list(rendition.warnings), "pages": rendition.pages}


def edit_cases() -> list[str]:
    return sorted(p.name.removesuffix(".in.md") for p in GOLDEN_EDITS.glob("*.in.md"))


def edit_of(case: str) -> dict:
    """The fields a golden edit case sets (`edit_frontmatter`'s keyword arguments)."""
    keywords = GOLDEN_EDITS / f"{case}.keywords.json"
    if keywords.exists():
        return {"keywords": json.loads(keywords.read_text(encoding="utf-8"))}
    return json.loads((GOLDEN_EDITS / f"{case}.edit.json").read_text(encoding="utf-8"))


def edited_for(case: str) -> str:
    """The golden input of `case` with its edit applied (bytes decoded as they are: a BOM and CRLF stay)."""
    source = (GOLDEN_EDITS / f"{case}.in.md").read_bytes().decode("utf-8")
    return edit_frontmatter(source, **edit_of(case))


def expected_for(path: Path):
    parsed = parse_frontmatter(path.read_bytes().decode("utf-8"))
    return None if parsed is None else parsed.to_dict()


def sections_for(path: Path):
    """The section parser's view of a document: what agents see listed, and each section's extent."""
    text = path.read_bytes().decode("utf-8")
    fm = parse_frontmatter(text)
    shape = outline(text, fm.sections if fm else ())
    lines = body_text(text).splitlines()
    return {
        "availableSections": None if shape.listed is None else list(shape.listed),
        "names": [list(pair) for pair in shape.names],
        "missing": list(shape.missing),
        "sections": [{"path": s.title, "level": s.heading.level, "listed": s.listed,
                      "first_line": lines[s.heading.line], "lines": s.end - s.heading.line}
                     for s in document_sections(lines)],
    }


def cleaned_for(path: Path) -> str:
    return clean_document(path.read_bytes().decode("utf-8"))


def cleaned_sections_for(path: Path):
    text = path.read_bytes().decode("utf-8")
    return {**sections_for(path), "chunk_headings": list(dict.fromkeys(c.heading for c in chunk_markdown(text)))}


if __name__ == "__main__":
    for md in sorted(GOLDEN.glob("*.md")):
        out = md.with_name(md.stem + ".expected.json")
        out.write_text(json.dumps(expected_for(md), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print("wrote", out.name)
    for md in sorted(GOLDEN_SECTIONS.glob("*.md")):
        out = md.with_name(md.stem + ".expected.json")
        out.write_text(json.dumps(sections_for(md), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print("wrote", out.name)
    for md in sorted(p for p in GOLDEN_CLEANING.glob("*.md") if not p.name.endswith(".expected.md")):
        out = md.with_name(md.stem + ".expected.md")
        out.write_text(cleaned_for(md), encoding="utf-8")
        print("wrote", out.name)
        out = md.with_name(md.stem + ".sections.json")
        out.write_text(json.dumps(cleaned_sections_for(md), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print("wrote", out.name)
    for case in edit_cases():
        out = GOLDEN_EDITS / f"{case}.out.md"
        out.write_bytes(edited_for(case).encode("utf-8"))
        print("wrote", out.name)
    GOLDEN_FORMATS.mkdir(exist_ok=True)
    for case in SAMPLES:
        markdown, suggestions = rendition_for(case)
        (GOLDEN_FORMATS / f"{case}.expected.md").write_text(markdown, encoding="utf-8")
        (GOLDEN_FORMATS / f"{case}.suggestions.json").write_text(
            json.dumps(suggestions, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print("wrote", f"{case}.expected.md", f"{case}.suggestions.json")

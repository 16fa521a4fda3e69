"""PDF, Word, PowerPoint, HTML and text files as Markdown renditions (kb_core/documents/formats/): the kind decided
by the bytes, the structure kept (golden renditions of files made at test time from our own words), the
suggestions, and every bad or heavy input refused with kb_core's own error, in a child process with limits."""

from __future__ import annotations

import io
import json
import random
import zipfile

import pytest
from support import format_files as ff
from support.golden_gen import GOLDEN_FORMATS, rendition_for

from kb_core.documents.formats import markdown_out as md
from kb_core.documents.formats import sandbox
from kb_core.documents.formats.convert import Limits, convert, converter_version, measure
from kb_core.documents.formats.kinds import Kind, mismatch_warning, sniff
from kb_core.documents.formats.suggest import keyword_candidates, summary_suggestion, title_suggestion
from kb_core.documents.sections import document_sections
from kb_core.errors import (
    ConversionLimitRejected,
    ConversionRejected,
    DamagedDocumentRejected,
    NoTextRejected,
    ProtectedDocumentRejected,
    UnsupportedFormatRejected,
    UploadRejected,
)


@pytest.fixture(scope="module")
def runbook() -> bytes:
    return ff.runbook_docx()


# --- the kind, by content ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "name", "kind"), [
    (b"%PDF-1.7\n...", "manual.pdf", Kind.PDF),
    (b"\xef\xbb\xbf  \n<!DOCTYPE html><html><body>x</body></html>", "page.txt", Kind.HTML),
    (b"<!-- generated -->\n<html lang='en'><p>x</p></html>", "page", Kind.HTML),
    (b"<?xml version='1.0'?>\n<html xmlns='http://www.w3.org/1999/xhtml'></html>", "a.xhtml", Kind.HTML),
    (b"<div>a fragment</div>", "fragment.htm", Kind.HTML),
    (b"<head><link rel='canonical' href='x'></head>\n# Title\n", "page.md", Kind.MARKDOWN),
    ("# Titel\n\nä ö ü 中文".encode(), "notes.markdown", Kind.MARKDOWN),
    (b"plain notes\nERR_TIMEOUT\n", "notes.txt", Kind.TEXT),
    (b"<div>not html by its name</div>", "notes.txt", Kind.TEXT),
    ("UTF-16 text 中文".encode("utf-16"), "notes.txt", Kind.TEXT),
])
def test_sniff_decides_by_content(data, name, kind):
    assert sniff(data, name) is kind


def test_sniff_reads_the_zip_members_not_the_name(runbook):
    assert sniff(runbook, "runbook.pdf") is Kind.DOCX
    assert sniff(ff.review_pptx(), "deck.docx") is Kind.PPTX
    assert "named .pdf but is a Word document" in mismatch_warning(Kind.DOCX, "runbook.pdf")
    assert mismatch_warning(Kind.DOCX, "runbook.docx") is None and mismatch_warning(Kind.TEXT, "README") is None
    taken = convert(runbook, "runbook.pdf")  # a Word file named .pdf is converted as what it is, and says so
    assert taken.kind is Kind.DOCX and any("named .pdf but is a Word document" in w for w in taken.warnings)


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize(("data", "said"), [
    (random.Random(45).randbytes(4096), "binary content of no type"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "OCR is not available"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512), "old binary Office file"),
    (_zip({"a.txt": b"x"}), "zip archive, not a Word"),
    (_zip({"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<w/>"}), "Excel workbook"),
    (b"{\\rtf1\\ansi hello}", "RTF document"),
    (b"text with a \x00 NUL", "binary content"),
    (b"", "empty"),
])
def test_sniff_refuses_what_it_does_not_convert(data, said):
    with pytest.raises(UnsupportedFormatRejected, match=said) as refused:
        sniff(data, "upload.pdf")
    assert isinstance(refused.value, UploadRejected) and refused.value.step == "validate"


def test_a_truncated_zip_is_damaged(runbook):
    with pytest.raises(DamagedDocumentRejected, match="damaged or truncated"):
        sniff(runbook[: len(runbook) // 2], "runbook.docx")


# --- golden renditions of files shaped like real documentation ---------------------------------------------------

@pytest.mark.parametrize("case", sorted(ff.SAMPLES))
def test_golden_renditions(case):
    """Each sample's Markdown and suggestions are the reviewed ones (regenerate with
    `python tests/support/golden_gen.py`, review the diff)."""
    markdown, suggestions = rendition_for(case)
    assert markdown == (GOLDEN_FORMATS / f"{case}.expected.md").read_text(encoding="utf-8")
    assert suggestions == json.loads((GOLDEN_FORMATS / f"{case}.suggestions.json").read_text(encoding="utf-8"))


def test_a_runbook_keeps_its_structure(runbook):
    rendition = convert(runbook, "payment-runbook.docx")
    text = rendition.markdown
    sections = [s.title for s in document_sections(text.splitlines())]
    assert sections[:3] == ["Payment gateway runbook", "Symptoms", "Recovery steps"]
    assert "### Error codes" in text  # Heading 2 under the Title: one level down
    assert "1. Check the health endpoint of payment-gateway\n2. Restart the deployment" in text
    assert "| ERR_GATEWAY_TIMEOUT | 504 |" in text and "Too many requests \\| back off and retry" in text
    assert "![Gateway latency dashboard with the p99 line in red](image)" in text
    assert "```\ncurl -s https://pay.example.com/healthz\nkubectl rollout restart deploy/payment-gateway\n```" in text
    assert "base64" not in text and "data:" not in text
    assert rendition.kind is Kind.DOCX and rendition.title == "Payment gateway runbook"
    assert rendition.summary.startswith("This runbook tells the on-call engineer")
    assert {"ERR_GATEWAY_TIMEOUT", "ERR_CARD_DECLINED", "gateway_latency_p99", "payment-gateway"} <= set(
        rendition.keyword_candidates)


def test_a_web_page_loses_its_chrome():
    rendition = convert(ff.article_html(), "rate-limits.html")
    text = rendition.markdown
    for chrome in ("Docs home", "Search docs", "Was this page helpful", "Privacy", "analytics", "font-family",
                   "¶", "base64"):
        assert chrome not in text, chrome
    assert text.startswith("# Rate limits\n")
    assert "`ERR_RATE_LIMITED`" in text and "| `X-RateLimit-Remaining` | requests left \\| in this second |" in text
    assert "```python\nif response.status_code == 429:\n    time.sleep(" in text
    # relative links are text; absolute ones keep their address
    assert "See the error reference or the [status page](https://status.example.com/)." in text
    assert "2. Wait that many seconds\n   - never less than one" in text
    assert rendition.title == "Rate limits"


def test_a_deck_has_a_section_per_slide():
    rendition = convert(ff.review_pptx(), "checkout-outage.pptx")
    headings = [line for line in rendition.markdown.splitlines() if line.startswith("#")]
    assert headings == ["# Checkout outage review", "## Timeline", "## Error codes seen",
                        "## Latency during the outage"]
    nested = "- 09:12 the gateway_latency_p99 alert fired\n  - Checkout returned ERR_GATEWAY_TIMEOUT"
    assert nested in rendition.markdown
    assert rendition.pages == 4 and "INC-2041" in rendition.keyword_candidates


def test_a_pdf_outline_gives_the_headings_and_a_ruled_table_stays_a_table():
    rendition = convert(ff.manual_pdf(), "gateway-manual.pdf")
    text = rendition.markdown
    assert "# Installing the gateway" in text and "## Error codes" in text and "# Before a release" in text
    assert "| ERR_CARD_DECLINED | 402 | The issuer declined the charge |" in text
    assert "```\napt install payment-gateway\nsystemctl enable --now payment-gateway\n```" in text
    assert "- Check that KST-5003 is closed" in text
    assert rendition.title == "Gateway operations manual" and rendition.pages == 1


def test_chinese_pdf_headings_by_font_size_and_text_joined_without_spaces():
    rendition = convert(ff.chinese_pdf(), "手册.pdf")
    assert rendition.markdown.startswith("# 支付网关运维手册\n")
    assert "## 常见问题" in rendition.markdown
    assert "健康状态。如果通道 bank-channel-03 不可用" in rendition.markdown
    assert rendition.keyword_candidates == ("ERR_GATEWAY_TIMEOUT", "bank-channel-03", "trace_id")


def test_text_and_markdown_pass_through():
    text = "# Notes\r\n\r\nERR_TIMEOUT means the upstream did not answer.\r\n"
    rendition = convert(text.encode(), "notes.txt")
    assert rendition.markdown == "# Notes\n\nERR_TIMEOUT means the upstream did not answer.\n"
    assert rendition.kind is Kind.TEXT and rendition.title == "Notes" and "ERR_TIMEOUT" in rendition.keyword_candidates
    assert convert(b"# A\n\nbody", "a.md").markdown == "# A\n\nbody\n"


def test_converter_version_names_the_library_version(monkeypatch):
    from importlib import metadata

    before = converter_version(Kind.PDF)
    assert before.startswith("kb-formats/") and "pypdfium2-" in before
    monkeypatch.setattr(metadata, "version", lambda name: "99.0")
    assert converter_version(Kind.PDF) != before and "pypdfium2-99.0" in converter_version(Kind.PDF)
    assert converter_version(Kind.TEXT) == converter_version(Kind.TEXT)


# --- the Markdown pieces and the suggestions ---------------------------------------------------------------------

def test_markdown_pieces_escape_structure_but_never_identifiers():
    assert md.table([["a|b", "c"], ["ERR_X_Y", "d\\e"]]) == "| a\\|b | c |\n|---|---|\n| ERR_X_Y | d\\\\e |"
    assert md.paragraph("# not a heading\n- not an item\nsnake_case_name") == \
        "\\# not a heading\n\\- not an item\nsnake_case_name"
    assert md.image("a [tricky] alt") == "![a (tricky) alt](image)"
    assert md.code_block("```\nx\n```") == "````\n```\nx\n```\n````"


def test_suggestions_come_from_the_text():
    markdown = ("# Table of Contents\n\n# Gateway setup\n\nShort.\n\nThe gateway reads max_body_size and "
                "retry-budget from gateway.yaml; see KST-5003 and [the page](https://x.example.com/a_b).\n\n"
                "```\nDEBUG_ONLY_FLAG=1\n```\n")
    assert title_suggestion(markdown, "") == "Gateway setup" and title_suggestion(markdown, "Props") == "Props"
    assert summary_suggestion(markdown).startswith("The gateway reads max_body_size")
    found = keyword_candidates(markdown)
    assert {"max_body_size", "gateway.yaml", "KST-5003", "DEBUG_ONLY_FLAG"} <= set(found)
    assert "x.example.com" not in found and "a_b" not in found  # link targets are no text
    assert found.index("retry-budget") > found.index("max_body_size")  # plain hyphenated words rank after


# --- bad and heavy input -----------------------------------------------------------------------------------------

def test_an_encrypted_pdf_is_refused():
    with pytest.raises(ProtectedDocumentRejected, match="password-protected"):
        convert(ff.encrypted_pdf(), "secret.pdf")


def test_a_scanned_pdf_has_no_text_to_index():
    with pytest.raises(NoTextRejected, match="no text to index: OCR is not available") as refused:
        convert(ff.scanned_pdf(), "scan.pdf")
    assert "images, as a scan is" in str(refused.value)


def test_a_truncated_pdf_is_refused():
    data = ff.manual_pdf()
    with pytest.raises(DamagedDocumentRejected, match="truncated"):
        convert(data[: len(data) * 2 // 3], "manual.pdf")


def test_random_bytes_named_pdf_are_refused():
    with pytest.raises(UnsupportedFormatRejected):
        convert(random.Random(7).randbytes(50_000), "manual.pdf")


def test_a_zip_bomb_is_refused_by_its_declared_size():
    with pytest.raises(ConversionLimitRejected, match="zip bomb") as refused:
        convert(ff.zip_bomb_docx(150), "bomb.docx")
    assert refused.value.limit == "zip"


def test_a_zip_bomb_is_refused_by_its_ratio():
    with pytest.raises(ConversionLimitRejected, match="inflates .* times") as refused:
        convert(ff.zip_bomb_docx(2), "small-bomb.pptx")
    assert refused.value.limit == "zip"


def test_a_zip_lying_about_its_sizes_is_caught_while_reading():
    with pytest.raises(ConversionRejected) as refused:
        convert(ff.lying_zip_docx(), "liar.docx")
    assert isinstance(refused.value, DamagedDocumentRejected | ConversionLimitRejected)


def test_too_many_zip_members_are_refused():
    data = ff.many_members_docx()
    with pytest.raises(ConversionLimitRejected, match="10,003 zip members"):
        sniff(data, "many.docx")  # by the end record, before the directory is parsed
    with pytest.raises(ConversionLimitRejected, match="zip members"):
        convert(data, "many.docx")


def test_a_converter_out_of_memory_is_refused_clearly():
    with pytest.raises(ConversionLimitRejected, match="ran out of its 24 MB") as refused:
        convert(ff.manual_pdf(), "manual.pdf", limits=Limits(memory_mb=24))
    assert refused.value.limit == "memory"


def test_a_300_page_pdf_converts_within_budget_with_progress():
    seen = []
    run = measure(ff.long_pdf(300), "reference.pdf", progress=lambda *args: seen.append(args))
    assert run.rendition.pages == 300 and run.rendition.markdown.count("\n# Setting group ") == 299
    assert run.seconds < Limits().seconds and run.peak_rss_bytes < 300 * 1024 * 1024
    assert seen[-1] == ("converting", 300, 300) and all(stage == "converting" for stage, _, _ in seen)


def test_a_conversion_past_its_time_is_refused():
    with pytest.raises(ConversionLimitRejected, match="took longer than 0.3 s") as refused:
        convert(ff.long_pdf(300), "reference.pdf", limits=Limits(seconds=0.3))
    assert refused.value.limit == "time"


@pytest.mark.parametrize(("frame", "error", "said"), [
    ({"refused": "NoTextRejected", "message": "no text"}, NoTextRejected, "no text"),
    ({"refused": "os.system", "message": "rm -rf"}, DamagedDocumentRejected, "rm -rf"),
    ({"refused": "ConversionLimitRejected", "message": "big", "limit": "../../x"}, ConversionLimitRejected, "big"),
    ({"ok": "not a dict", "peak_rss_kb": 1}, DamagedDocumentRejected, "nonsense"),
    ({"ok": {}, "peak_rss_kb": "1"}, DamagedDocumentRejected, "nonsense"),
    ([1, 2], DamagedDocumentRejected, "nonsense"),
    ({"memory": True}, ConversionLimitRejected, "ran out of its 300 MB"),
    ({"failed": "KeyError: 'x'"}, DamagedDocumentRejected, "could not be converted"),
])
def test_nothing_the_child_says_builds_an_object(frame, error, said):
    with pytest.raises(error, match=said) as refused:
        sandbox._answer(frame, "f.pdf", sandbox.ChildLimits(), 0.1)
    if error is ConversionLimitRejected:
        assert refused.value.limit in sandbox.LIMITS


def test_a_rendition_without_usable_fields_is_refused():
    from kb_core.documents.formats.convert import _rendition

    with pytest.raises(DamagedDocumentRejected, match="usable markdown"):
        _rendition(Kind.PDF, {"markdown": 3, "title": "", "pages": 0, "warnings": []}, "f.pdf", [], Limits())
    with pytest.raises(ConversionLimitRejected, match="characters of text") as refused:
        _rendition(Kind.PDF, {"markdown": "x" * 101, "title": "", "pages": 0, "warnings": []}, "f.pdf", [],
                   Limits(max_markdown_chars=100))
    assert refused.value.limit == "output"


def test_the_benchmark_prints_a_row_per_kind(tmp_path, capsys):
    from benchmarks.bench_convert import main

    (tmp_path / "manual.pdf").write_bytes(ff.manual_pdf())
    (tmp_path / "notes.txt").write_bytes(b"ERR_TIMEOUT notes\n")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really")
    assert main([str(tmp_path), "--json", str(tmp_path / "out.json")]) == 0
    printed = capsys.readouterr().out
    assert "| kind | files | refused | pages | pages/s |" in printed
    kinds = json.loads((tmp_path / "out.json").read_text())["kinds"]
    assert kinds["pdf"]["files"] == 1 and kinds["pdf"]["pages"] == 1 and 0 < kinds["pdf"]["peak_rss_mb_max"] < 300
    assert kinds["docx"]["refused"] == {"DamagedDocumentRejected": 1} and kinds["text"]["files"] == 1


def test_pages_without_marked_main_text():
    """A page in its own charset is HTML; a menu of links is left out where nothing marks the article; an
    article wrapped in an `aside` is still read."""
    page = ("<!DOCTYPE html><html><head><meta charset='windows-1252'><title>Caf\xe9</title></head><body>"
            "<div><a href='/a'>Home</a> <a href='/b'>Shop</a> <a href='/c'>Contact</a></div>"
            "<div><h1>Caf\xe9 opening hours</h1><p>The caf\xe9 opens at eight and closes when the last guest "
            "leaves the terrace.</p></div></body></html>").encode("cp1252")
    assert sniff(page, "cafe.html") is Kind.HTML
    rendition = convert(page, "cafe.html")
    assert rendition.markdown.startswith("# Café opening hours\n") and "Shop" not in rendition.markdown
    wrapped = b"<html><body><aside><p>Everything this page says sits in an aside by mistake.</p></aside></body></html>"
    assert "sits in an aside by mistake" in convert(wrapped, "wrapped.html").markdown

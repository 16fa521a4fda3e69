"""Bounded cost for heavy but legal input: a 5 MB document made of headings, hostile heading
text and section titles, a 100,000-character query. Bounds are checked by counting work and sizes (headings
read, lines looked at, chunks, what L0 keeps, file reads); the deadlines are generous, so that a regression
fails instead of hanging. The timings themselves are measured by `benchmarks/bench_heavy.py`."""

from __future__ import annotations

import random
import re
import tracemalloc

import pytest
from support.documents import doc, write_doc
from support.fakes import RecordingL1

from benchmarks.bench_heavy import heavy_document
from kb_core import HybridLookup, KnowledgeIndex
from kb_core.documents import cleaning
from kb_core.documents.chunking import MAX_CHUNKS, MAX_INDEXED_CHARS, chunk_document, chunk_markdown
from kb_core.documents.frontmatter import parse_frontmatter
from kb_core.documents.sections import (
    _CODE_SPAN,
    MAX_HEADING_CHARS,
    MAX_HEADINGS,
    MAX_LISTED,
    MAX_NAMED,
    MAX_SCANNED_LINES,
    MAX_TITLE_CHARS,
    MORE,
    _code_spans,
    body_text,
    outline,
    render_inline,
    scan_headings,
    serve_section,
)
from kb_core.errors import InvalidInputError
from kb_core.keywords.entry import KnowledgeEntry

LIMIT = 5 * 1024 * 1024 - 4096  # just under KB_MAX_UPLOAD_BYTES' default


def heavy(kind: str) -> tuple[str, int]:
    """(a document of `kind` made of headings, how many), just under 5 MiB (`benchmarks/bench_heavy.py`'s)."""
    return heavy_document(kind, LIMIT)


@pytest.fixture(scope="module")
def flat() -> tuple[str, int]:
    return heavy("flat")


# -- the heading scan ---------------------------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["flat", "nested", "cjk"])
def test_a_5_mb_document_of_headings_is_read_up_to_the_caps(kind, flat):
    text, count = flat if kind == "flat" else heavy(kind)
    assert count > 100_000 and len(text.encode()) <= LIMIT
    scan = scan_headings(body_text(text))
    assert len(scan.headings) == MAX_HEADINGS and not scan.complete and scan.looked <= MAX_HEADINGS
    shape = outline(text)
    assert len(shape.listed) == MAX_LISTED + 1 and shape.listed[-1] == MORE
    assert all(len(name) <= 3 * MAX_HEADING_CHARS + 6 for name in shape.listed)
    chunking = chunk_document(text)
    assert not chunking.complete and not chunking.all_headings and len(chunking.chunks) == MAX_CHUNKS


@pytest.mark.timeout(60)
def test_a_section_of_a_huge_document_is_served_within_the_caps_and_a_later_one_gets_a_note(flat):
    text, count = flat
    served = serve_section(text, "heading 1234")
    assert served.path == "heading 1234" and served.content == "## heading 1234\nline 1234"
    beyond = serve_section(text, f"heading {count - 3}")
    assert beyond.content is None and beyond.note.startswith(f"no section 'heading {count - 3}'")
    ambiguous = serve_section(text, "heading 1")  # exact: the one named so
    assert ambiguous.path == "heading 1"
    many = serve_section(text, "heading")  # every section contains it: the note names 20 of them
    assert many.content is None and many.note.startswith("ambiguous: heading 0, heading 1,")
    assert many.note.endswith(f"… ({MAX_HEADINGS - 20} more)") and len(many.note) < 1000


@pytest.mark.timeout(120)
def test_serving_a_section_of_a_5_mb_document_allocates_a_few_copies_of_it(flat):
    text, _count = flat
    tracemalloc.start()
    try:
        serve_section(text, "heading 1999")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * len(text)  # the body, its cleaned and "\n"-prefixed copies; no line list of 364,000 str


@pytest.mark.timeout(60)
def test_lines_that_cannot_be_headings_are_not_looked_at_one_by_one():
    # a fence of 200,000 shell comments, a paragraph of 500,000 lines under a setext underline, #hashtags
    body = ("```sh\n" + "# comment\n" * 200_000 + "```\n\n" + "#tag\n" * 100_000 + "\nwords\n" * 1
            + "more words\n" * 500_000 + "======\n## after\n")
    scan = scan_headings(body)
    assert scan.complete and scan.looked == 3  # the fence (its end is found by one search), the underline, a heading
    assert [(h.level, h.text[:20], h.cut) for h in scan.headings] == [(1, "words more words mor", True),
                                                                      (2, "after", False)]
    assert len(scan.headings[0].raw) <= MAX_HEADING_CHARS


@pytest.mark.timeout(60)
def test_a_document_of_rules_stops_at_the_scan_budget():
    scan = scan_headings("---\n\n" * (MAX_SCANNED_LINES + 5_000) + "# late\n")
    assert not scan.complete and scan.looked == MAX_SCANNED_LINES and scan.headings == []


# -- hostile heading text and section titles -----------------------------------------------------------------
@pytest.mark.timeout(60)
def test_long_headings_are_cut_for_names_and_kept_whole_in_the_chunks():
    long = "Long " * 80
    text = f"---\ntitle: t\n---\n# Title\n\n## {long}\n\nbody text\n\n## Short\n\nmore\n"
    listed = outline(text).listed
    assert listed[0] == " ".join(long.split())[:MAX_HEADING_CHARS].rstrip() and listed[1] == "Short"
    chunks = chunk_markdown(text)
    cut = next(c for c in chunks if "body text" in c.text)
    assert len(cut.heading_path[-1]) <= MAX_HEADING_CHARS and f"## {long.strip()}" in cut.text
    assert serve_section(text, listed[0]).content.endswith("body text")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("title", ["`" * 100_000, "*" * 100_000, "[" * 100_000, "a " * 50_000])
def test_a_huge_section_title_is_answered_with_a_note_at_once(title, flat):
    served = serve_section(flat[0], title)
    assert served.content is None and f"at most {MAX_TITLE_CHARS:,} characters" in served.note
    assert len(served.note) < 2000


@pytest.mark.timeout(60)
def test_headings_of_backticks_render_in_linear_time():
    text = "---\ntitle: t\n---\n" + "".join(f"## {'`' * 299}{i}\n\nx\n\n" for i in range(MAX_HEADINGS))
    assert len(outline(text).listed) == MAX_LISTED + 1  # 2,000 headings of 300 backticks: was 0.2 s each
    assert render_inline("`" * 2000) == "`" * 2000


def test_code_spans_are_found_as_the_regex_finds_them():
    def reference(text):
        return [(m.start(), m.end(), m.start(2), m.end(2)) for m in _CODE_SPAN.finditer(text)]

    rng = random.Random(3)
    pieces = ["`", "``", "```", "a", "b ", " ", "\n", "x`y", "`` `"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        assert _code_spans(text) == reference(text), repr(text)
    assert render_inline("`` `limit_req` `` and `a`") == "`limit_req` and a"


# -- what L0 keeps and what a lookup reads ------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_the_l0_entry_of_a_huge_document_keeps_a_bounded_section_list(flat):
    text, _count = flat
    named = "".join(f"  n{i}: '## heading {i}'\n" for i in range(MAX_NAMED + 50))
    text = text.replace("keywords: [HEAVY_DOC]\n", f"keywords: [HEAVY_DOC]\nsections:\n{named}", 1)
    fm = parse_frontmatter(text)
    assert len(fm.sections) == MAX_NAMED + 50
    entry = KnowledgeEntry.from_frontmatter("knowledge_base/heavy/heavy.md", fm, "heavy", text)
    assert len(entry.sections) == MAX_LISTED + 1 and entry.sections[0] == "n0"
    assert len(entry.section_names) == MAX_NAMED
    assert sum(len(a) + len(b) for a, b in entry.section_names) < 10_000


@pytest.mark.timeout(120)
def test_a_section_lookup_reads_the_huge_file_once_and_a_plain_lookup_not_at_all(tmp_path, flat, monkeypatch):
    text, _count = flat
    write_doc(tmp_path, "knowledge_base/heavy/heavy.md", text)
    write_doc(tmp_path, "knowledge_base/api/small.md", doc("Small", ["SMALL_DOC"]))
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    reads: list[tuple[str, int]] = []
    original = KnowledgeIndex.excerpt

    def counting(self, file_path, max_chars=2000, *, clean=False):
        reads.append((file_path, max_chars))
        return original(self, file_path, max_chars, clean=clean)

    monkeypatch.setattr(KnowledgeIndex, "excerpt", counting)
    lookup = HybridLookup(index, RecordingL1())
    result = lookup.lookup("HEAVY_DOC", "heading 1500")
    assert result.primary.section == "heading 1500" and result.primary.content == "## heading 1500\nline 1500"
    whole = [r for r in reads if r[1] < 0]
    assert whole == [("knowledge_base/heavy/heavy.md", -1)]  # once, whole; the head read is bounded
    assert all(r[1] >= 0 for r in reads if r not in whole)
    reads.clear()
    assert lookup.lookup("HEAVY_DOC").primary.available_sections[-1] == MORE
    assert reads and all(0 <= r[1] <= 2000 for r in reads)


# -- chunking and the upload preview ------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_chunking_stops_at_the_caps_and_the_preview_says_so(tmp_path):
    # paragraphs of 704 characters: one a chunk, so the 1,000,000 characters come before the 2,000 chunks
    paragraph = "When the pool is exhausted the gateway queues the request and retries after a back-off. " * 8
    text = doc("Prose", ["PROSE_DOC"], body="# Prose\n\n" + (paragraph.strip() + "\n\n") * 2_000)
    chunking = chunk_document(text)
    assert not chunking.complete and chunking.all_headings
    assert MAX_INDEXED_CHARS <= chunking.indexed_chars < MAX_INDEXED_CHARS + 800 and len(chunking.chunks) < MAX_CHUNKS
    write_doc(tmp_path, "knowledge_base/api/other.md", doc("Other", ["OTHER_DOC"]))
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    from kb_core.documents.lint import preview_upload

    preview = preview_upload(index, "prose.md", text.encode(), "api")
    warnings = [f.message for f in preview.findings]
    assert any(m.startswith(f"long document: full-text and semantic search (L1) index its first "
                            f"{len(chunking.chunks):,} chunks") for m in warnings), warnings
    small = preview_upload(index, "small.md", doc("Small", ["SMALL_DOC"]).encode(), "api")
    assert not any("long document" in f.message or "headings" in f.message for f in small.findings)


@pytest.mark.timeout(60)
def test_the_preview_of_a_document_of_headings_names_both_caps(flat):
    from kb_core.documents.lint import _size_findings

    messages = [f.message for f in _size_findings(flat[0])]
    assert len(messages) == 2 and f"more than {MAX_HEADINGS:,} headings" in messages[1]


@pytest.mark.timeout(60)
def test_a_paragraph_of_tiny_sentences_is_cut_in_linear_time():
    text = doc("One line", ["ONE_LINE"], body="a. " * 600_000)  # 1.8 MB on one line, 600,000 sentences
    chunking = chunk_document(text)
    assert all(len(c.text) <= 800 for c in chunking.chunks) and not chunking.complete


# -- cleaning -----------------------------------------------------------------------------------------------
def _reference_clean_body(body: str) -> str:
    """`clean_body` as it was: every line through the whole rule (the rule's reference)."""
    c = cleaning
    out: list[str] = []
    fence = None
    in_comment = in_head = False
    in_export = 0
    for line in body.splitlines():
        if fence is not None:
            out.append(line)
            match = c._FENCE.match(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if in_comment:
            end = line.find("-->")
            if end < 0:
                continue
            in_comment = False
            line = line[end + 3 :]
        if in_head:
            close = c._HEAD_CLOSE.search(line)
            if close is None:
                continue
            in_head = False
            line = line[close.end() :]
        if in_export:
            in_export = max(in_export + c._open_brackets(line), 0)
            continue
        match = c._FENCE.match(line)
        if match:
            fence = match.group(1)
            out.append(line)
            continue
        line, in_comment = c._strip_comments(line)
        if c._HEAD_OPEN.match(line):
            close = c._HEAD_CLOSE.search(line)
            if close is None:
                in_head = True
                continue
            line = line[close.end() :]
        if c._MDX_LINE.match(line):
            if line.startswith("export"):
                in_export = max(c._open_brackets(line), 0)
            continue
        if "#" in line or "<" in line:
            line = c._clean_atx(line)
        elif out and out[-1].strip() and c._SETEXT_UNDERLINE.match(line) and not c._NOT_PARAGRAPH.match(out[-1]):
            out[-1] = c.clean_heading(out[-1])
        out.append(line)
    text = "\n".join(out)
    return c._BLANK_RUN.sub("\n\n", text).strip("\n") + ("\n" if text.strip() else "")


_LINES = ["# A", "## B {#id}", "Title {#t}", "Intro {.lead}", "===", "---", "  ", "", "", "```", "~~~~", "````",
          "``` python", "- item {#x}", "text", "<!-- c -->", "<!-- open", "still", "close -->", "x --> y <!-- z",
          "<head>", "<HEAD><link></head>", "</head> after", "import x from 'y'", "export const a = {", "  b: [1,",
          "  ]", "}", "export let q = 1", "## <a name=\"x\"></a>Setup", "<a id='y'></a>", "## Q {#q} ##", "    code",
          "| t |", "Para\\{#esc\\}", "## 描述 {#description}", "  ---", "<header>", "# {#only}", "-->"]


def test_clean_body_cleans_as_the_line_by_line_rule_did():
    rng = random.Random(11)
    for _ in range(3000):
        sep = rng.choice(["\n"] * 6 + ["\r\n", "\r"])
        body = sep.join(rng.choice(_LINES) for _ in range(rng.randint(0, 40))) + rng.choice(["", "\n", " "])
        assert cleaning.clean_body(body) == _reference_clean_body(body), repr(body)


@pytest.mark.timeout(60)
def test_cleaning_a_5_mb_body_with_a_licence_comment_copies_the_plain_lines_in_slices(flat, monkeypatch):
    body = "<!-- Licensed to the Apache Software Foundation -->\n" + flat[0].split("---\n\n", 1)[1]
    looked: list[str] = []
    line = cleaning._Cleaner.line
    monkeypatch.setattr(cleaning._Cleaner, "line", lambda self, text: (looked.append(text), line(self, text))[1])
    cleaned = cleaning.clean_body(body)
    assert looked == [body.split("\n", 1)[0]]  # the comment; every heading line is copied in one slice
    assert cleaned.startswith("## heading 0\nline 0") and cleaned.count("\n") == body.count("\n") - 1


# -- the Python API's query limit ---------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_kb_lookup_refuses_a_100_000_character_query_before_any_tokenizer(open_kb, monkeypatch):
    from kb_core import terms
    from kb_core.agent.tool import MAX_QUERY_CHARS  # the one limit (check_query_length)

    kb = open_kb()
    monkeypatch.setattr(terms, "_tokenizer", lambda: pytest.fail("a tokenizer ran"))
    monkeypatch.setattr(HybridLookup, "lookup", lambda *a, **k: pytest.fail("the lookup ran"))
    query = "支付网关超时" * 16_667
    with pytest.raises(InvalidInputError, match=re.escape(f"at most {MAX_QUERY_CHARS:,} are accepted")):
        kb.lookup(query)
    # the tool's own answer is unchanged: an error result naming the limit
    payload = kb.lookup_knowledge(query)
    assert payload["found"] is False and f"at most {MAX_QUERY_CHARS}" in payload["error"]

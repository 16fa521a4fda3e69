"""Boilerplate out, code untouched: the cleaner's golden cases (one rule for answers, chunks, sections and
the inspector), and the terms the L1 relevance check uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.golden_gen import GOLDEN_CLEANING, cleaned_for, cleaned_sections_for  # noqa: E402
from support.paths import FIXTURES

from kb_core.documents.chunking import chunk_markdown
from kb_core.documents.cleaning import clean_body, clean_document, clean_heading, needs_cleaning
from kb_core.documents.sections import body_text, document_sections, outline, serve_section
from kb_core.terms import analyse_query, coverage

CLEANING_CASES = sorted(p for p in GOLDEN_CLEANING.glob("*.md") if not p.name.endswith(".expected.md"))

LICENCE = """<!--
#
# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
#
-->
"""

DOC = f"""---
title: limit-req
keywords: [limit-req, Plugin]
---
{LICENCE}
<head>
  <link rel="canonical" href="https://docs.example.org/limit-req" />
</head>

import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
export const meta = {{
  title: 'x',
}};

# limit-req {{#limit-req}}

Limits the request rate <!-- TODO: link --> per key.

```yaml
<!-- a comment in a sample stays -->
import: this is YAML, not MDX
```

```md
## A heading in a sample keeps its id {{#sample}}
```

## Attributes {{#attributes}}
"""


def test_boilerplate_goes_and_code_stays():
    cleaned = clean_document(DOC)
    assert cleaned.startswith("---\ntitle: limit-req\nkeywords: [limit-req, Plugin]\n---\n\n# limit-req\n")
    for gone in ("Licensed", "<head>", "canonical", "import Tabs", "export const", "TODO"):
        assert gone not in cleaned
    assert "Limits the request rate  per key." in cleaned
    assert "<!-- a comment in a sample stays -->\nimport: this is YAML, not MDX" in cleaned
    assert "## A heading in a sample keeps its id {#sample}" in cleaned
    assert cleaned.rstrip().endswith("## Attributes") and "{#limit-req}" not in cleaned


@pytest.mark.parametrize("case", CLEANING_CASES, ids=[p.stem for p in CLEANING_CASES])
def test_golden_generated_docs(case: Path):
    """Docusaurus / MDX / Pandoc-shaped pages: the cleaned answer, and the sections and chunk headings read
    from it (regenerate with `python tests/support/golden_gen.py`, review the diff)."""
    assert cleaned_for(case) == case.with_name(case.stem + ".expected.md").read_text(encoding="utf-8")
    expected = json.loads(case.with_name(case.stem + ".sections.json").read_text(encoding="utf-8"))
    assert cleaned_sections_for(case) == expected
    shown = [*(expected["availableSections"] or ()), *(s["path"] for s in expected["sections"]),
             *expected["chunk_headings"]]
    assert not any(re.search(r"(?<!\{)\{[#.:-]|<a ", name) for name in shown), shown  # `{{#each}}` is text


@pytest.mark.parametrize(("heading", "cleaned"), [
    ("描述 {#description}", "描述"),
    ("Attributes {#attributes}", "Attributes"),
    ("删除插件 \\{#delete-plugin\\}", "删除插件"),  # MDX escapes the braces
    ("Active checks {#active .beta}", "Active checks"),
    ('Passive {#passive data-since="3.2"}', "Passive"),
    ("Probe settings {: #probe}", "Probe settings"),  # kramdown
    ("Troubleshooting {-}", "Troubleshooting"),  # Pandoc's unnumbered
    ("Lead {.lead}", "Lead"),
    ('<a name="overview"></a>Overview', "Overview"),
    ("Overview <a id='overview'></a>", "Overview"),
    ("Use {{#each}}", "Use {{#each}}"),  # template syntax is heading text
    ("The {host} placeholder", "The {host} placeholder"),
    ("Map {a: b}", "Map {a: b}"),
    ("{#id} in front", "{#id} in front"),  # only a trailing list is an attribute list
    ("C#", "C#"),
])
def test_heading_attributes_and_anchors_go_and_lookalikes_stay(heading, cleaned):
    assert clean_heading(heading) == cleaned
    assert clean_body(f"## {heading}\n") == f"## {cleaned}\n"


def test_a_section_title_with_the_old_anchor_still_matches():
    doc = ("---\ntitle: t\n---\n# limit-conn {#limit-conn}\n\n## 描述 {#description}\n\ntext\n\n"
           "## 属性 {#attributes}\n\n### 按消费者限制 {#per-consumer}\n\nper consumer\n")
    assert outline(doc).listed == ("描述", "属性", "属性 > 按消费者限制")
    for title, path in [("描述 {#description}", "描述"), ("描述 \\{#description\\}", "描述"), ("描述", "描述"),
                        ("属性 {#attributes} > 按消费者限制 {#per-consumer}", "属性 > 按消费者限制"),
                        ("按消费者限制 {#per-consumer}", "属性 > 按消费者限制")]:
        served = serve_section(doc, title)
        assert served.path == path and served.note is None, title
        assert "{#" not in served.content
    named = outline(doc, (("说明", "## 描述 {#description}"),))  # a curator copied the heading line with its id
    assert named.listed == ("说明",) and named.names == (("说明", "描述"),) and named.missing == ()


_LINES = st.sampled_from([
    "", "text", "text {#not-a-heading}", "## A {#a}", "## B", "### C {.c}", "# D \\{#d\\}", "Setext {#s}", "---",
    "===", "- item {#i}", "```", "```md", "~~~", "<!-- c -->", "<!--", "-->", "import X from 'x';",
    "export const t = [", "];", "<head>", "</head>", '## <a name="e"></a>E', "    ## code {#k}", "## {{#each}}",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=25))
def test_the_section_list_always_reads_the_cleaned_body(lines):
    """`body_text` skips the cleaning pass for bodies `needs_cleaning` says are clean: it must never skip one
    the cleaner would change, or sections and chunks would disagree."""
    body = "\n".join(lines) + "\n"
    cleaned = clean_body(body)
    assert [s.title for s in document_sections(body_text("---\ntitle: t\n---\n" + body).splitlines())] == \
        [s.title for s in document_sections(cleaned.splitlines())]
    if not needs_cleaning(body):
        assert [line for line in cleaned.splitlines() if line.strip()] == [line for line in lines if line.strip()]


@pytest.mark.parametrize("body", ["", "\n\n", "plain text\n", "```\n<!-- open\n", "<!-- never closed\ntext\n"])
def test_degenerate_bodies_do_not_break(body):
    cleaned = clean_body(body)
    assert isinstance(cleaned, str)
    if body.startswith("```"):
        assert "<!-- open" in cleaned  # an unclosed fence keeps everything after it


def test_chunks_start_at_the_content_not_at_the_licence():
    chunks = chunk_markdown(DOC)
    assert chunks[0].heading_path == ("limit-req",)
    assert not any("{#limit-req}" in c.heading or "{#limit-req}" in c.text for c in chunks)
    assert all("Licensed" not in c.text and "import Tabs" not in c.text for c in chunks)
    assert any("<!-- a comment in a sample stays -->" in c.text for c in chunks)


def test_a_document_without_frontmatter_is_cleaned_too():
    assert clean_document(f"{LICENCE}\n# Title\n\ntext\n") == "# Title\n\ntext\n"


@pytest.mark.parametrize("query, terms, required", [
    ("遇到和AI 网关有关的报错该如何排查", ["ai", "网关", "排查"], ["ai"]),
    ("What does key_claim_name do?", ["key_claim_name"], ["key_claim_name"]),
    ("完全不存在的内容XYZ", ["xyz", "完全", "存在", "内容"], ["xyz"]),
    ("KST-9999", ["kst-9999"], ["kst-9999"]),
    ("reject clients that exceed per-interface limits", ["per-interface", "reject", "clients", "exceed", "limits"],
     []),
])
def test_query_terms_drop_filler_and_keep_identifiers_whole(query, terms, required):
    analysed = analyse_query(query)
    assert list(analysed.terms) == terms and list(analysed.required) == required


def test_identifiers_count_only_whole():
    whole = frozenset({"err_timeout"})
    assert coverage(["err_timeout"], "see ERR_TIMEOUT_4071", whole)[0] == 0
    assert coverage(["err_timeout"], "see ERR_TIMEOUT.", whole)[0] == 1
    assert coverage(["ai"], "please explain", frozenset({"ai"}))[0] == 0


@pytest.mark.parametrize("body", [
    LICENCE + "# Big\n\n" + ("A paragraph about upstream retries and timeouts. " * 20 + "\n\n") * 3000,  # 3 MB
    "<!--\n" + "x\n" * 200_000 + "-->\n# After the long comment\n\ncontent\n",  # the head is all boilerplate
])
def test_an_answer_reads_and_cleans_only_the_head_of_a_large_file_yet_equals_the_full_clean(tmp_path, body):
    from kb_core.keywords.index import KnowledgeIndex

    text = "---\ntitle: Big\nkeywords: [BIG]\n---\n" + body
    (tmp_path / "knowledge_base/api").mkdir(parents=True)
    (tmp_path / "knowledge_base/api/big.md").write_text(text, encoding="utf-8")
    full = clean_document(text)
    expected = full[:2000] + "..." if len(full) > 2000 else full
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    assert index.excerpt("knowledge_base/api/big.md", 2000, clean=True) == expected


def _component_lines(text: str) -> list[str]:
    """Lines outside code fences that open or close a component's tag, or state an import."""
    found, fence = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif re.match(r"</?[A-Z]", stripped) or re.match(r"import\s", stripped) or stripped.endswith("]}>"):
            found.append(line)
    return found


def test_no_component_tags_or_imports_reach_answers_or_chunks_from_real_shaped_pages():
    """Documentation sites write a component's tag over several lines (`<Tabs` then `values={[ … ]}>`) and
    imports over several lines: none of it reaches the served content or an L1 chunk."""
    pages = sorted((FIXTURES / "realistic_kb").rglob("*.md"))
    multi_line = [p for p in pages if re.search(r"^<Tabs\s*$", p.read_text(encoding="utf-8"), re.M)]
    assert len(multi_line) >= 10  # the fixture has them: this test checks something
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert _component_lines(clean_document(text)) == [], page.name
        for chunk in chunk_markdown(text):
            assert _component_lines(chunk.text) == [], page.name


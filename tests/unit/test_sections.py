"""The section parser: golden files, markup as rendered, matching rules, frontmatter `sections` and its lint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.golden_gen import GOLDEN_SECTIONS, sections_for  # noqa: E402
from support.paths import TESTS

from kb_core import KnowledgeIndex
from kb_core.documents.frontmatter import parse_frontmatter, parse_sections
from kb_core.documents.lint import preview_upload
from kb_core.documents.sections import (
    CHIPS,
    MORE,
    SEPARATOR,
    body_text,
    document_sections,
    find_headings,
    listed_sections,
    match_section,
    outline,
    render_inline,
    section_chips,
)

GOLDEN_CASES = sorted(GOLDEN_SECTIONS.glob("*.md"))
FIXTURES = TESTS / "fixtures" / "sections_kb" / "gateway"


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden_files(case: Path):
    expected = json.loads(case.with_name(case.stem + ".expected.json").read_text(encoding="utf-8"))
    assert sections_for(case) == expected


def test_golden_cases_cover_the_issue():
    names = {p.stem for p in GOLDEN_CASES}
    assert {"markup-headings", "setext", "fenced-code", "nested", "frontmatter-sections", "cjk-emoji",
            "no-headings"} <= names


@pytest.mark.parametrize(("markdown", "rendered"), [
    ("`limit_req_zone`", "limit_req_zone"),
    ("**Bold** and *em* and _under_", "Bold and em and under"),
    ("[Admin API](../admin-api.md) and ![logo](logo.png)", "Admin API and logo"),
    ("<kbd>Ctrl</kbd> + <span class=\"x\">C</span>", "Ctrl + C"),
    ("Tom &amp; Jerry &lt;3", "Tom & Jerry <3"),
    (r"\*not emphasis\* and \[not a link\]", "*not emphasis* and [not a link]"),
    ("snake_case_name stays", "snake_case_name stays"),
    ("`**code keeps stars**`", "**code keeps stars**"),
    ("<https://lumen.example/docs>", "https://lumen.example/docs"),
    ("缓存  **穿透**", "缓存 穿透"),
])
def test_headings_are_read_as_rendered(markdown: str, rendered: str):
    assert render_inline(markdown) == rendered


def test_atx_rules():
    lines = ["# C#", "## Title ##", "###No space", "    # indented code", "   ### three spaces", "#", "## \\#"]
    assert [(h.level, h.text) for h in find_headings(lines)] == [(1, "C#"), (2, "Title"), (3, "three spaces"),
                                                                 (2, "#")]


def _sections(markdown: str):
    return document_sections(markdown.splitlines())


NESTED = "# Doc\n\n## Nginx\n\n### Attributes\n\nx\n\n## Envoy\n\n### Attributes\n\ny\n\n## Attribute list\n"


def test_duplicate_heading_names_under_different_parents_are_told_apart_by_path():
    sections = _sections(NESTED)
    assert listed_sections(sections) == ("Nginx", "Nginx > Attributes", "Envoy", "Envoy > Attributes",
                                         "Attribute list")
    match = match_section(sections, "attributes")
    assert match.section is None and match.note == "ambiguous: Nginx > Attributes, Envoy > Attributes"
    assert match_section(sections, "envoy > ATTRIBUTES").section.title == "Envoy > Attributes"


def test_matching_is_exact_first_then_the_unique_container():
    sections = _sections(NESTED)
    assert match_section(sections, "Attribute list").section.title == "Attribute list"  # exact beats container
    assert match_section(sections, "list").section.title == "Attribute list"
    assert match_section(sections, "ngin").section.title == "Nginx"  # not ambiguous with its child's path
    assert match_section(sections, "Doc").section.title == "Doc"  # the title H1 is matched, though not listed


def test_nfkc_and_casefold():
    sections = _sections("# T\n\n## ＦＡＱ：全角\n\n## Straße\n")
    assert match_section(sections, "faq:全角").section.title == "ＦＡＱ：全角"
    assert match_section(sections, "STRASSE").section.title == "Straße"


def test_a_title_with_markup_is_retried_as_rendered():
    sections = _sections("# T\n\n## How `rate` and `burst` interact\n\n## Other\n")
    assert match_section(sections, "`rate` and `burst`").section.title == "How rate and burst interact"
    assert match_section(sections, "**Other**").section.title == "Other"


def test_no_match_lists_what_is_available():
    sections = _sections(NESTED)
    note = match_section(sections, "Pricing", available=listed_sections(sections)).note
    assert note == ("no section 'Pricing'; available: Nginx, Nginx > Attributes, Envoy, Envoy > Attributes, "
                    "Attribute list")


def test_sixty_headings_list_fifty_and_an_ellipsis():
    body = "\n\n".join(f"## Step {i}\n\ntext {i}" for i in range(1, 61))
    listed = outline(f"---\ntitle: t\n---\n{body}\n").listed
    assert len(listed) == 51 and listed[-1] == MORE and listed[:2] == ("Step 1", "Step 2") and listed[49] == "Step 50"


def test_a_document_without_headings_has_no_sections():
    assert outline("---\ntitle: t\n---\nplain text\n#1 is an issue\n").listed is None
    assert outline("---\ntitle: t\n---\n# Only a title\n\ntext\n").listed == ("Only a title",)


def test_frontmatter_sections_are_validated_tolerantly():
    assert parse_sections({"超时排查": "## 1. 超时类错误"}) == ((("超时排查", "## 1. 超时类错误"),), ())
    pairs, problems = parse_sections({"ok": "## A", "bad": ["## B"], "empty": "  "})
    assert pairs == (("ok", "## A"),) and len(problems) == 2
    assert parse_sections(["## A"])[1] == ("`sections` must be a mapping of name: heading line, got a list; it is "
                                           "ignored",)
    fm = parse_frontmatter("---\ntitle: t\nsections: just text\n---\n# A\n")
    assert fm is not None and fm.sections == () and fm.extra["sections"] == "just text"


def test_upload_lint_reports_bad_sections_and_headings_not_in_the_body(tmp_path):
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    data = (FIXTURES / "curated-runbook.md").read_bytes()
    preview = preview_upload(index, "runbook.md", data, "ops")
    messages = [f.message for f in preview.findings]
    assert preview.can_upload
    assert any("已废弃" in m and "## 9. 旧版网关" in m and "not a heading" in m for m in messages), messages
    assert not any("超时排查" in m for m in messages)
    bad = data.replace(b'  Escalation: "## 3.', b'  Escalation: ["## 3.').replace(b'Escalation"\n', b'Escalation"]\n')
    messages = [f.message for f in preview_upload(index, "r.md", bad, "ops").findings]
    assert any("Escalation" in m and "non-empty string" in m for m in messages), messages


def test_realistic_fixtures_are_long_and_bilingual():
    reference = (FIXTURES / "limit-req-reference.md").read_text(encoding="utf-8")
    assert len(reference.encode()) > 20_000 and "漏桶" in reference and "leaky bucket" in reference
    catalogue = (FIXTURES / "admin-api-error-catalogue.md").read_text(encoding="utf-8")
    assert len(find_headings(body_text(catalogue).splitlines())) == 63  # H1 + 2 x (H2 + 30 x H3)


# -- chips: which sections a console shows at once ------------------------------------------------------------
def _reference_sections(tops: int, children: int) -> tuple[str, ...]:
    listed: list[str] = []
    for t in range(1, tops + 1):
        listed.append(f"Part {t}")
        listed += [f"Part {t} > Item {c}" for c in range(1, children + 1)]
    return tuple(listed)


def test_chips_show_the_top_level_sections_first_and_about_a_dozen():
    listed = _reference_sections(4, 10)  # 44 sections, as a plugin reference has them
    chips = section_chips(listed)
    assert len(chips.shown) == CHIPS and not chips.truncated
    assert [n for n in chips.shown if SEPARATOR not in n] == ["Part 1", "Part 2", "Part 3", "Part 4"]
    assert chips.shown[:3] == ("Part 1", "Part 1 > Item 1", "Part 1 > Item 2")  # document order
    assert set(chips.shown) | set(chips.more) == set(listed) and not set(chips.shown) & set(chips.more)
    assert list(chips.more) == [n for n in listed if n not in chips.shown]


def test_chips_deeper_levels_come_after_shallower_ones():
    listed = ("A", "A > B", "A > B > C", "A > B > D", *(f"A > E{i}" for i in range(20)))
    shown = section_chips(listed, limit=4).shown
    assert shown == ("A", "A > B", "A > E0", "A > E1")


def test_chips_a_list_that_nearly_fits_is_shown_whole_and_many_top_levels_are_cut_too():
    assert section_chips(_reference_sections(13, 0)).more == ()  # 13 chips: no "more" for one
    assert section_chips(("A", "B", "C")).shown == ("A", "B", "C")
    assert section_chips(None) == section_chips(()) and section_chips(None).shown == ()
    sixty = outline("---\ntitle: t\n---\n" + "\n\n".join(f"## Step {i}\n\ntext" for i in range(1, 61))).listed
    chips = section_chips(sixty)
    assert chips.truncated and chips.shown == tuple(f"Step {i}" for i in range(1, CHIPS + 1))
    assert MORE not in chips.shown + chips.more and len(chips.more) == 50 - CHIPS


def test_chips_the_chosen_section_is_always_shown():
    listed = _reference_sections(4, 10)
    chips = section_chips(listed, chosen=("Part 4 > Item 9", None))
    assert "Part 4 > Item 9" in chips.shown and len(chips.shown) == CHIPS + 1
    assert "Part 4 > Item 9" not in chips.more

"""`section_title` and `availableSections` through `HybridLookup` on long bilingual documents. L1 is the
recording fake: these tests are about which part of the primary is served, not about search."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fakes import RecordingL1
from support.paths import TESTS

from kb_core import HybridLookup, KnowledgeIndex, L1Hit
from kb_core.documents import sections as sections_module

FIXTURES = TESTS / "fixtures" / "sections_kb"
REFERENCE = "knowledge_base/gateway/limit-req-reference.md"
CATALOGUE = "knowledge_base/gateway/admin-api-error-catalogue.md"
NOTES = "knowledge_base/gateway/release-notes-3-9-1.md"
RUNBOOK = "knowledge_base/gateway/curated-runbook.md"


@pytest.fixture
def root(tmp_path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "knowledge_base")
    return tmp_path


@pytest.fixture
def index(root) -> KnowledgeIndex:
    idx = KnowledgeIndex("knowledge_base", app_root=root)
    idx.load()
    return idx


def lookup(index, query, section_title=None, l1=None):
    return HybridLookup(index, l1 or RecordingL1()).lookup(query, section_title)


def written_section(root: Path, source: str, heading_line: str) -> str:
    """The section as the file has it: from its heading line to the next heading of the same or a higher level."""
    text = (root / source).read_text(encoding="utf-8")
    start = text.index(f"\n{heading_line}\n") + 1
    level = heading_line.split(" ")[0]
    ends = [text.find(f"\n{'#' * n} ", start + 1) for n in range(1, len(level) + 1)]
    end = min([e for e in ends if e > 0], default=len(text))
    return text[start:end].strip("\n")


def test_available_sections_are_heading_paths_in_document_order(index):
    primary = lookup(index, "limit-req").primary
    assert primary.source == REFERENCE and primary.section is None
    listed = primary.available_sections
    assert listed[:4] == ("Attributes", "Attributes > Attributes for the local policy",
                          "Attributes > Attributes for the redis policy",
                          "Attributes > Attributes for the redis-cluster policy")
    assert "How rate and burst interact" in listed  # rendered: no backticks
    assert "Enable the Plugin > 在控制台中启用" in listed and "常见问题 / FAQ" in listed
    assert not any("Licensed" in s or "YAML comment" in s or "END" == s for s in listed)  # comments and code
    assert primary.to_dict()["availableSections"] == list(listed)


def test_exact_section_is_served_and_cut_at_2000_characters(index, root):
    result = lookup(index, "limit-req", section_title="Attributes")
    expected = written_section(root, REFERENCE, "## Attributes")
    assert len(expected) > 2000  # the Attributes section with its three sub-sections
    assert result.primary.section == "Attributes"
    assert result.primary.content == expected[:2000] + "..."
    assert result.note is None and "note" not in result.to_dict()
    assert result.to_dict()["primary"]["section"] == "Attributes"


def test_a_short_section_is_served_whole_with_its_sub_sections(index, root):
    result = lookup(index, "limit-req", section_title="Troubleshooting > Requests are slow but not rejected")
    assert result.primary.content == written_section(root, REFERENCE, "### Requests are slow but not rejected")
    result = lookup(index, "limit-req", section_title="Upgrade notes")
    assert result.primary.content == written_section(root, REFERENCE, "## Upgrade notes")
    assert "### From 3.8 to 3.9" in result.primary.content and "### 从 2.x 升级" in result.primary.content


def test_contained_and_cjk_titles(index):
    assert lookup(index, "limit-req", section_title="redis-cluster").primary.section == \
        "Attributes > Attributes for the redis-cluster policy"
    assert lookup(index, "漏桶限流", section_title="按租户").primary.section == "Examples > 示例：按租户限流"
    assert lookup(index, "limit-req", section_title="常见问题 / faq").primary.section == "常见问题 / FAQ"


def test_a_title_with_markup_matches_as_rendered(index):
    result = lookup(index, "limit-req", section_title="How `rate` and `burst` interact")
    assert result.primary.section == "How rate and burst interact"
    assert result.primary.content.startswith("## How `rate` and `burst` interact\n")  # served as written
    assert lookup(index, "limit-req", section_title="**Shared memory**").primary.section == "Shared memory"


def test_ambiguous_title_serves_the_document_and_says_which(index):
    plain = lookup(index, "limit-req")
    result = lookup(index, "limit-req", section_title="redis")
    assert result.primary.section is None and result.primary.content == plain.primary.content
    assert result.note == ("ambiguous: Attributes > Attributes for the redis policy, "
                           "Attributes > Attributes for the redis-cluster policy, "
                           "Troubleshooting > Redis errors in the error log")
    assert result.to_dict()["note"] == result.note and result.found


def test_missing_title_lists_the_available_sections(index):
    result = lookup(index, "limit-req", section_title="Pricing")
    assert result.primary.section is None
    assert result.note.startswith("no section 'Pricing'; available: Attributes, Attributes > Attributes for the ")
    assert result.note.endswith(", Glossary / 术语")


def test_sixty_headings_list_fifty_then_an_ellipsis_and_later_ones_still_match(index, root):
    primary = lookup(index, "E40001").primary
    assert primary.source == CATALOGUE
    listed = primary.available_sections
    assert len(listed) == 51 and listed[-1] == "…"
    assert listed[0] == "Client errors / 客户端错误" and listed[1].startswith("Client errors / 客户端错误 > E")
    text = (root / CATALOGUE).read_text(encoding="utf-8")
    last = [line for line in text.splitlines() if line.startswith("### ")][-1]  # the 62nd section, not listed
    code = last[4:].split(":")[0]
    assert not any(code in s for s in listed)
    result = lookup(index, "E40001", section_title=code)
    assert result.primary.section == f"Server errors / 服务端错误 > {last[4:]}"
    assert result.primary.content == written_section(root, CATALOGUE, last)


def test_a_document_without_headings_has_null_sections_and_a_note(index):
    result = lookup(index, "版本说明", section_title="Upgrade")
    assert result.primary.source == NOTES
    assert result.primary.available_sections is None
    assert result.to_dict()["primary"]["availableSections"] is None
    assert result.note == "no section 'Upgrade'; available: none"


def test_frontmatter_section_names_are_listed_and_served(index, root):
    result = lookup(index, "ERR_TIMEOUT", section_title="线程池")
    assert result.primary.available_sections == ("超时排查", "线程池", "Escalation")  # 已废弃: not in the body
    assert result.primary.section == "1. 超时类错误 > 1.2 线程池打满 / Thread pool exhausted"
    assert result.primary.content == written_section(root, RUNBOOK, "### 1.2 线程池打满 / Thread pool exhausted")
    assert lookup(index, "ERR_TIMEOUT", section_title="escalation").primary.section == \
        "3. 升级与值班 / Escalation"


def test_l1_only_answers_say_the_section_was_not_applied(index):
    l1 = RecordingL1([L1Hit("a passage", REFERENCE, 0.8)])
    result = lookup(index, "how do I smooth traffic spikes", "Attributes", l1)
    assert result.primary is None and result.supplement.source == REFERENCE
    assert "not applied" in result.note and "'Attributes'" in result.note


def test_the_l0_l1_decision_does_not_depend_on_the_section(index):
    for query in ("limit-req", "Plugin", "nothing matches this"):
        calls = []
        for section in (None, "Attributes"):
            l1 = RecordingL1()
            result = lookup(index, query, section, l1)
            calls.append((l1.calls, result.trace.l1_called, result.primary and result.primary.source))
        assert calls[0] == calls[1], query


def test_the_section_list_is_not_computed_at_lookup_time(index, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("outline() called at lookup time")

    monkeypatch.setattr(sections_module, "outline", refuse)
    monkeypatch.setattr("kb_core.keywords.entry.outline", refuse)
    assert lookup(index, "limit-req").primary.available_sections[0] == "Attributes"


def test_an_edited_document_gets_its_new_sections_on_refresh(index, root):
    path = root / REFERENCE
    path.write_text(path.read_text(encoding="utf-8").replace("## Shared memory", "## Shared dictionary"),
                    encoding="utf-8")
    assert index.refresh(REFERENCE)
    listed = lookup(index, "limit-req").primary.available_sections
    assert "Shared dictionary" in listed and "Shared memory" not in listed


def test_a_generated_page_is_answered_clean_everywhere(tmp_path):
    """A Docusaurus page (licence comment, `<head>`, MDX imports, heading ids in Chinese headings): the content,
    `availableSections` and the served section come out of one cleaning rule; the old anchored name still works."""
    golden = TESTS / "golden" / "cleaning" / "docusaurus-zh.md"
    (tmp_path / "knowledge_base" / "gateway-zh").mkdir(parents=True)
    shutil.copy(golden, tmp_path / "knowledge_base" / "gateway-zh" / "limit-conn.md")
    idx = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    idx.load()
    whole = lookup(idx, "limit-conn").primary
    assert whole.confidence == "high" and whole.available_sections == ("属性说明", "排障")  # the curator's names
    prose, sample = whole.content.split("```md\n")[0], whole.content.split("```md\n")[1].split("```")[0]
    for gone in ("Licensed", "<head>", "import Tabs", "{#limit-conn}", "{#description}", "{#faq}", "delete-plugin"):
        assert gone not in prose, gone
    assert "## 描述\n" in prose and "常见问题\n---" in whole.content
    assert sample == "## 描述 {#description}\nimport Tabs from '@theme/Tabs';\n<!-- 示例中的注释保留 -->\n"  # untouched
    for title, path in (("描述 {#description}", "描述"), ("属性 {#attributes} > 按消费者限制 {#limit-per-consumer}",
                                                        "属性 > 按消费者限制"), ("常见问题 {#faq}", "常见问题")):
        served = lookup(idx, "limit-conn", title).primary
        assert served.section == path and "{#" not in served.content.splitlines()[0], title
